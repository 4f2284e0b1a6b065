//! What the generalising DqnGPU agent knows of one candidate placement: a waiting job on a GPU,
//! described by usage only (the job's profile, the GPU's residents, the predicted interference
//! between them), never by app name, so one set of weights serves any app, any number of
//! waiting jobs and any cluster.
//!
//! A decision round offers, again and again, every legal (waiting job, GPU) pair plus "hold"
//! (stop placing for now); the caller picks one row, [`Round::take`]s it, and asks again, until
//! it holds or nothing is legal. Legal: no app it was OOM-killed beside is there, no idle GPU
//! could take the job instead (then only idle GPUs are offered for it), and memory
//! fits, by either of two rules: the job's peak beside the residents' remaining peaks (the
//! packing heuristics' rule, so no phase drift can overflow the card), or, where peaks
//! collide, the time-aligned rule DqnGPU exists for: a prediction of that GPU with the job
//! added (the simulator's own stepping under the contention model, [`dqngpu_sim::budget`])
//! in which memory never passes the card. Feature `peak_fits` tells the two apart. Hold is
//! not offered while a GPU is idle and some job fits it (a learned policy must not leave a
//! fitting job waiting beside an idle GPU).

use std::collections::HashMap;
use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{AppProfile, ClusterView, Placement, QueuedJob, Resources};
use dqngpu_policy::{fit, Greedy, Member};
use dqngpu_sim::budget::{self, BudgetJob, BUDGET_MARGIN_STEPS};
use foldhash::fast::FixedState;

use super::memo::{FitMemo, FitQuestion};

/// Inputs per candidate row.
pub const FEATURES: usize = 19;

/// Feature names, in row order (docs/RL.md explains each).
pub const NAMES: [&str; FEATURES] = [
    "hold",
    "gpu_idle",
    "residents",
    "log_solo",
    "solo_rank",
    "solo_vs_mean",
    "gain",
    "own_rate",
    "residents_loss",
    "gain_per_work",
    "job_peak_mem",
    "free_mem_after",
    "job_mean_util",
    "residents_util_now",
    "queue_len",
    "waited_share",
    "idle_gpus",
    "residents_left_vs_solo",
    "peak_fits",
];

/// The time-aligned memory rule must also hold with the residents this many seconds ahead and
/// behind: the simulator cuts steps at arrivals and finishes elsewhere, so phases drift by a
/// sample against the prediction, and an exact fit overflowed the card once (OOM kill seen
/// in test `under_a_budget_no_job_is_slowed_past_it`, 2 GPUs, Poisson arrivals).
const DRIFT_S: f64 = 1.0;

/// What every row of one choice shares: the waiting jobs' solo-time ranks and spread, which
/// GPUs are idle, the queue's length.
struct QueueFacts {
    rank: Vec<usize>,
    rank_den: f64,
    min_solo: f64,
    mean_solo: f64,
    idle: Vec<bool>,
    idle_share: f32,
    queue_len: f32,
}

/// One decision round over a cluster view (the jobs placed so far in it count as residents).
pub struct Round<'v> {
    view: &'v ClusterView<'v>,
    greedy: &'v Greedy,
    /// Committed peak load per GPU (residents' remaining peaks plus the jobs placed here).
    load: Vec<Resources>,
    members: Vec<Vec<Member<'v>>>,
    chosen: Vec<Vec<&'v QueuedJob>>,
    taken: Vec<bool>,
    peaks: Vec<Resources>,
    /// Each waiting job's mean GPU util over its profile (a profile summary is a pass over
    /// every sample; once per round, not once per row).
    mean_util: Vec<f64>,
    /// Predicted (gain, own rate) and time-aligned memory fit per (profile, GPU), dropped for
    /// a GPU when a job joins it (jobs of one app share them); hashed with foldhash, since
    /// they are asked for every row (SipHash was a twentieth of a plan decision's CPU).
    gains: HashMap<(*const AppProfile, usize), (f64, f64), FixedState>,
    aligned: HashMap<(*const AppProfile, usize), bool, FixedState>,
    /// The caller's slowdown budget (a fraction), when it set one: rows it would refuse are
    /// not offered.
    budget: Option<f64>,
    /// The caller's interference model, which the memory and budget predictions step with.
    model: Arc<dyn Interference>,
    /// The caller's step, s, which they step at (the budget's margin is half a step).
    step_s: f64,
    /// (job index, GPU) of each row of the last [`Round::rows`]; `None` is hold.
    pairs: Vec<Option<(usize, usize)>>,
    /// For an argmax caller ([`Round::for_argmax`]): idle twins merged, time-aligned checks
    /// deferred to [`Round::confirm`].
    for_argmax: bool,
    /// Per row of the last [`Round::rows`]: legal only if [`Round::confirm`] says so.
    pending: Vec<bool>,
    /// Time-aligned answers kept across rounds (a search's, [`Round::with_memo`]).
    memo: Option<&'v FitMemo>,
}

impl<'v> Round<'v> {
    /// A round over `view` for a caller with no budget and the default contention model; the
    /// features predict interference with `greedy`'s model.
    pub fn new(view: &'v ClusterView<'v>, greedy: &'v Greedy) -> Self {
        Round::for_caller(view, greedy, &super::Caller::default())
    }

    /// A round that offers only rows `caller` would admit: memory that fits, and with a
    /// budget, groups its prediction admits ([`dqngpu_sim::budget`], the same prediction), both
    /// stepped with the caller's interference model.
    pub fn for_caller(view: &'v ClusterView<'v>, greedy: &'v Greedy, caller: &super::Caller) -> Self {
        Round {
            view,
            greedy,
            load: view.gpus.iter().map(fit::committed).collect(),
            members: view
                .gpus
                .iter()
                .map(|g| g.running.iter().map(|r| Member { profile: &r.profile, progress_s: r.progress_s }).collect())
                .collect(),
            chosen: vec![Vec::new(); view.gpus.len()],
            taken: vec![false; view.queue.len()],
            peaks: view.queue.iter().map(fit::job_peak).collect(),
            mean_util: view.queue.iter().map(|q| q.profile.summary().mean.gpu_util_pct).collect(),
            gains: HashMap::default(),
            aligned: HashMap::default(),
            model: caller.model.clone(),
            step_s: caller.step_s,
            budget: caller.max_slowdown,
            pairs: Vec::new(),
            for_argmax: false,
            pending: Vec::new(),
            memo: None,
        }
    }

    /// The same round, reading and keeping its time-aligned answers in `memo` (for the
    /// caller's model, step and budget only: a memo belongs to one caller).
    pub fn with_memo(mut self, memo: Option<&'v FitMemo>) -> Self {
        self.memo = memo;
        self
    }

    /// A round for a caller that takes the highest-scoring legal row (the first of equal
    /// scores), which then chooses as with every row checked, at less cost:
    /// - the rows of an idle GPU twin to an earlier idle GPU (same model, nothing on either)
    ///   are left out: they equal the earlier one's, which comes first;
    /// - a row on a busy GPU that needs the time-aligned memory rule or the budget's
    ///   prediction is offered unchecked; the caller asks [`Round::confirm`] before taking it
    ///   and tries the next best row if not.
    ///
    /// Not for sampling or look-ahead, which weigh every row.
    pub fn for_argmax(mut self) -> Self {
        self.for_argmax = true;
        self
    }

    /// True when row `row` of the last [`Round::rows`] is legal (always, but for the rows
    /// [`Round::for_argmax`] leaves unchecked, which are checked now).
    pub fn confirm(&mut self, row: usize) -> bool {
        if !self.pending.get(row).copied().unwrap_or(false) {
            return true;
        }
        let Some((i, g)) = self.pair(row) else { return true };
        let peak_fits = fit::fits_memory(&self.load[g], &self.peaks[i], &self.view.gpus[g]);
        self.check(i, g, peak_fits)
    }

    /// The memory rule (and the budget, when set) for job `i` on GPU `g`, where the peak rule
    /// alone does not settle it.
    fn check(&mut self, i: usize, g: usize, peak_fits: bool) -> bool {
        match self.budget {
            Some(b) => self.predicted_fit(i, g, b, peak_fits),
            None => peak_fits || self.predicted_fit(i, g, f64::INFINITY, false),
        }
    }

    /// Writes the rows of the pending choice into `out` (`FEATURES` values per row) and
    /// returns how many; 0 when nothing can be placed (the round is over). Hold, when allowed,
    /// is row 0.
    pub fn rows(&mut self, out: &mut Vec<f32>) -> usize {
        out.clear();
        self.pairs.clear();
        self.pending.clear();
        let view = self.view;
        let waiting: Vec<usize> = (0..view.queue.len()).filter(|&i| !self.taken[i]).collect();
        if waiting.is_empty() {
            return 0;
        }
        // Rank by solo time, shortest first (ties by arrival then id, as SJF).
        let mut order = waiting.clone();
        order.sort_by(|&a, &b| fit::shortest_first(&view.queue[a], &view.queue[b]));
        let mut rank = vec![0usize; view.queue.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
        }
        let solo = |&i: &usize| view.queue[i].profile.solo_s();
        let min_solo = waiting.iter().map(solo).fold(f64::INFINITY, f64::min).max(1e-9);
        let mean_solo = (waiting.iter().map(solo).sum::<f64>() / waiting.len() as f64).max(1e-9);
        let idle: Vec<bool> = self.members.iter().map(Vec::is_empty).collect();
        let idle_share = idle.iter().filter(|&&b| b).count() as f32 / idle.len().max(1) as f32;
        let queue_len = ((1.0 + waiting.len() as f64).ln() / 5.0) as f32;
        let rank_den = (waiting.len().max(2) - 1) as f64;
        let ctx = QueueFacts { rank, rank_den, min_solo, mean_solo, idle, idle_share, queue_len };
        let idle = &ctx.idle;
        // (Empty, so unallocated, but for an argmax caller.)
        let mut twin = Vec::new();
        if self.for_argmax {
            twin = vec![false; view.gpus.len()];
            // The first idle GPU of each model; every later idle one of that model is a twin
            // (checked against those firsts only, so a large cluster costs GPUs x models).
            let mut firsts: Vec<usize> = Vec::new();
            for g in (0..view.gpus.len()).filter(|&g| idle[g]) {
                match firsts.iter().any(|&e| self.idle_twin_gpus(e, g)) {
                    true => twin[g] = true,
                    false => firsts.push(g),
                }
            }
        }
        // Written straight after a hold row, which is dropped if an idle GPU takes a row.
        let mut hold = [0f32; FEATURES];
        hold[0] = 1.0;
        hold[14] = queue_len;
        hold[16] = idle_share;
        out.extend_from_slice(&hold);
        self.pairs.push(None);
        self.pending.push(false);
        let mut idle_fits = false;
        for &i in &waiting {
            let job = &view.queue[i];
            // A job an idle GPU can take is not offered beside other jobs: sharing would slow
            // it and them for nothing (an action mask, as Decima's and DeepRM's).
            let idle_takes = view.gpus.iter().enumerate().any(|(g, gpu)| {
                idle[g]
                    && fit::compatible(job, gpu, &self.chosen[g])
                    && self.peaks[i].gpu_mem_mib <= gpu.spec.memory_mib
            });
            for (g, gpu) in view.gpus.iter().enumerate() {
                if twin.get(g) == Some(&true) || (idle_takes && !idle[g]) || !fit::compatible(job, gpu, &self.chosen[g])
                {
                    continue;
                }
                // A job whose peak passes an idle card never runs there (the simulator drops the
                // placement, `fits_alone`): under a budget such a row skipped every check, took
                // hold away, and its GPU's whole group was lost on a cluster of mixed models.
                if idle[g] && self.peaks[i].gpu_mem_mib > gpu.spec.memory_mib {
                    continue;
                }
                let peak_fits = fit::fits_memory(&self.load[g], &self.peaks[i], gpu);
                // Alone on a GPU a job is never refused for slowdown (nothing slows it).
                let needs_check = if self.budget.is_some() { !idle[g] } else { !peak_fits };
                let defer = needs_check && self.for_argmax && !idle[g];
                if needs_check && !defer && !self.check(i, g, peak_fits) {
                    continue;
                }
                self.pending.push(defer);
                idle_fits |= idle[g];
                let r = self.features(i, g, peak_fits, &ctx);
                out.extend_from_slice(&r);
                self.pairs.push(Some((i, g)));
            }
        }
        if self.pairs.len() == 1 {
            out.clear();
            self.pairs.clear();
            self.pending.clear();
            return 0;
        }
        if idle_fits {
            out.drain(..FEATURES);
            self.pairs.remove(0);
            self.pending.remove(0);
        }
        self.pairs.len()
    }

    /// The features of placing job `i` on GPU `g` (see [`NAMES`]).
    fn features(&mut self, i: usize, g: usize, peak_fits: bool, q: &QueueFacts) -> [f32; FEATURES] {
        let view = self.view;
        let job = &view.queue[i];
        let solo = job.profile.solo_s().max(1e-9);
        let waited = (view.now_s - job.submit_s).max(0.0);
        let gpu = &view.gpus[g];
        let (gain, own) = self.gain(i, g);
        let cap = gpu.spec.memory_mib.max(1.0);
        let members = &self.members[g];
        let util_now: f64 =
            members.iter().map(|m| m.profile.demand_at(m.progress_s.min(m.profile.solo_s())).gpu_util_pct).sum();
        let left: f64 = if members.is_empty() {
            0.0
        } else {
            members.iter().map(|m| (m.profile.solo_s() - m.progress_s).max(0.0)).sum::<f64>() / members.len() as f64
        };
        let mut r = [0f32; FEATURES];
        r[1] = q.idle[g] as u8 as f32;
        r[2] = members.len() as f32 / 4.0;
        r[3] = ((1.0 + solo / 60.0).ln() / 5.0) as f32;
        r[4] = (q.rank[i] as f64 / q.rank_den) as f32;
        r[5] = ((solo / q.mean_solo).min(4.0) / 4.0) as f32;
        r[6] = gain as f32;
        r[7] = own as f32;
        r[8] = (own - gain) as f32;
        r[9] = (gain * q.min_solo / solo) as f32;
        r[10] = (self.peaks[i].gpu_mem_mib / cap) as f32;
        r[11] = ((cap - self.load[g].gpu_mem_mib - self.peaks[i].gpu_mem_mib) / cap) as f32;
        r[12] = (self.mean_util[i] / 100.0) as f32;
        r[13] = ((util_now / 100.0).min(2.0) / 2.0) as f32;
        r[14] = q.queue_len;
        r[15] = (waited / (waited + solo)) as f32;
        r[16] = q.idle_share;
        r[17] = ((left / solo).min(4.0) / 4.0) as f32;
        r[18] = peak_fits as u8 as f32;
        r
    }

    /// The (job index in the view's queue, GPU) of row `row` of the last [`Round::rows`];
    /// `None` for hold (or a row that does not exist).
    pub fn pair(&self, row: usize) -> Option<(usize, usize)> {
        self.pairs.get(row).copied().flatten()
    }

    /// The row of the last [`Round::rows`] that places job `id` on GPU `gpu`, if legal.
    pub fn row_of(&self, id: dqngpu_model::JobId, gpu: usize) -> Option<usize> {
        self.pairs.iter().position(|p| matches!(p, Some((i, g)) if *g == gpu && self.view.queue[*i].id == id))
    }

    /// True when rows `a` and `b` of the last [`Round::rows`] place the same job on two GPUs of
    /// the same model with nothing on either (nor placed there this round): the same choice but
    /// for the GPU's name, with the same features and, by symmetry, the same future.
    pub fn idle_twins(&self, a: usize, b: usize) -> bool {
        match (self.pair(a), self.pair(b)) {
            (Some((i, g)), Some((j, h))) => i == j && self.idle_twin_gpus(g, h),
            _ => false,
        }
    }

    /// True when GPUs `g` and `h` are two GPUs of one model with nothing on either, nor
    /// placed there this round (what [`Round::for_argmax`] merges and the plan plays once).
    fn idle_twin_gpus(&self, g: usize, h: usize) -> bool {
        g != h
            && self.members[g].is_empty()
            && self.members[h].is_empty()
            && self.view.gpus[g].spec == self.view.gpus[h].spec
    }

    /// True when row 0 of the last [`Round::rows`] is hold.
    pub fn hold_offered(&self) -> bool {
        matches!(self.pairs.first(), Some(None))
    }

    /// Takes row `row` of the last [`Round::rows`]: places its job, or (hold) ends the round.
    /// Returns false when the round is over.
    pub fn take(&mut self, row: usize) -> bool {
        let Some((i, g)) = self.pair(row) else { return false };
        let job = &self.view.queue[i];
        self.taken[i] = true;
        self.load[g] = self.load[g].add(&self.peaks[i]);
        self.members[g].push(Member { profile: &job.profile, progress_s: 0.0 });
        self.chosen[g].push(job);
        self.gains.retain(|k, _| k.1 != g);
        self.aligned.retain(|k, _| k.1 != g);
        true
    }

    /// The placements chosen so far, one per GPU.
    pub fn placements(&self) -> Vec<Placement> {
        fit::placements(self.chosen.clone())
    }

    /// The round's placements with row `row` of the last [`Round::rows`] taken too, and
    /// whether that row is hold (then the placements are the round's as they are).
    pub fn placements_with(&self, row: usize) -> (Vec<Placement>, bool) {
        let mut placements = self.placements();
        let Some((i, gpu)) = self.pair(row) else { return (placements, true) };
        let id = self.view.queue[i].id;
        match placements.iter_mut().find(|p| p.gpu == gpu) {
            Some(p) => p.jobs.push(id),
            None => placements.push(Placement { gpu, jobs: vec![id] }),
        }
        (placements, false)
    }

    fn gain(&mut self, i: usize, g: usize) -> (f64, f64) {
        let profile = &self.view.queue[i].profile;
        let key = (std::sync::Arc::as_ptr(profile), g);
        if let Some(v) = self.gains.get(&key) {
            return *v;
        }
        let p = self.greedy.predict(&self.view.gpus[g].spec, &self.members[g], profile);
        self.gains.insert(key, (p.total, p.own));
        (p.total, p.own)
    }

    /// True when the GPU's residents (with the jobs placed this round) and job `i`, run
    /// together from now, are predicted never to hold more memory than the card and, with a
    /// finite `max_slowdown`, never to slow a job past it (less the budget's safety margin).
    fn predicted_fit(&mut self, i: usize, g: usize, max_slowdown: f64, peak_fits: bool) -> bool {
        let profile = &self.view.queue[i].profile;
        let key = (std::sync::Arc::as_ptr(profile), g);
        if let Some(v) = self.aligned.get(&key) {
            return *v;
        }
        let gpu = &self.view.gpus[g];
        let starting = || self.chosen[g].iter().copied().chain(std::iter::once(&self.view.queue[i]));
        let mut jobs = budget::resident_jobs(self.view.now_s, gpu);
        jobs.extend(starting().map(BudgetJob::starting));
        let question = FitQuestion { spec: &gpu.spec, peak_fits, residents: gpu.running.len(), jobs: &jobs };
        if let Some(fits) = self.memo.and_then(|m| m.fits(&question)) {
            self.aligned.insert(key, fits);
            return fits;
        }
        let mut fits = if max_slowdown.is_finite() {
            let slack = BUDGET_MARGIN_STEPS * self.step_s;
            budget::predict(&gpu.spec, &*self.model, &jobs, max_slowdown, slack, self.step_s).admitted
        } else {
            budget::memory_fits(&gpu.spec, &*self.model, &jobs, self.step_s)
        };
        if fits && !peak_fits {
            let residents = question.residents;
            for shift in [DRIFT_S, -DRIFT_S] {
                let mut drifted = jobs.clone();
                for j in &mut drifted[..residents] {
                    j.progress_s = (j.progress_s + shift).max(0.0);
                }
                fits &= budget::memory_fits(&gpu.spec, &*self.model, &drifted, self.step_s);
            }
        }
        if let Some(memo) = self.memo {
            // The jobs' profiles, in the question's order.
            let running = gpu.running.iter().map(|r| &r.profile);
            let profiles: Vec<&Arc<AppProfile>> = running.chain(starting().map(|q| &q.profile)).collect();
            memo.put(&question, fits, &profiles);
        }
        self.aligned.insert(key, fits);
        fits
    }
}
