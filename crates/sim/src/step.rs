//! The rule by which jobs sharing one GPU progress. The [`Simulator`](crate::Simulator) steps
//! with it, and so does anything that predicts what the simulator will do (DqnGPU's slowdown
//! guard), so the prediction and the simulation cannot drift apart.
//!
//! One step of the jobs on a GPU:
//! 1. the interference model turns the demands at the step's start into progress rates,
//!    floored at [`RATE_FLOOR`] and capped at 1 ([`gpu_rates`]);
//! 2. the step lasts the time asked for, cut short at the first finish ([`time_to_finish`]);
//! 3. each job gains `rate x dt` of progress, or finishes within the step ([`advance`]).
//!
//! [`LoneGpu`] does all three for jobs on one GPU with nothing else happening.

use dqngpu_interference::{Interference, JobLoad};
use dqngpu_model::{AppProfile, GpuSpec};

/// Smallest progress rate the simulator applies: a model that answers less (or NaN) is
/// raised to this, so time always advances. (Not a model's own floor: the contention model
/// never answers below its own [`dqngpu_interference::MIN_RATE`].)
pub const RATE_FLOOR: f64 = 1e-3;

/// A model's rate as the simulator applies it: NaN or below [`RATE_FLOOR`] becomes the floor,
/// above 1 becomes 1.
#[inline]
pub fn floor_rate(r: f64) -> f64 {
    if r.is_nan() {
        RATE_FLOOR
    } else {
        r.clamp(RATE_FLOOR, 1.0)
    }
}

/// Writes into `rates` the rates of the jobs in `loads` sharing `gpu`, as the simulator
/// applies them (the model's answer through [`floor_rate`]). `rates.len() == loads.len()`.
#[inline]
pub fn gpu_rates(model: &dyn Interference, gpu: &GpuSpec, loads: &[JobLoad<'_>], rates: &mut [f64]) {
    if loads.is_empty() {
        return;
    }
    model.rates(gpu, loads, rates);
    for r in rates.iter_mut() {
        *r = floor_rate(*r);
    }
}

/// Wall time a job with `remaining_s` of its own progress time left needs at `rate`, s.
#[inline]
pub fn time_to_finish(remaining_s: f64, rate: f64) -> f64 {
    remaining_s.max(0.0) / rate
}

/// What one step did to one job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Advance {
    /// Still running, at this progress, s of its own time.
    Running {
        /// Progress after the step, s.
        progress_s: f64,
    },
    /// Finished this long into the step, s.
    Finished {
        /// Wall time from the step's start to the finish, s.
        after_s: f64,
    },
}

/// A job at `progress_s` running at `rate` for a step of `dt` wall seconds, which finishes
/// `t_finish` wall seconds from the step's start ([`time_to_finish`]). A finish within a
/// relative 1e-12 of the step's end counts as within the step (floating-point slack).
#[inline]
pub fn advance(progress_s: f64, rate: f64, t_finish: f64, dt: f64) -> Advance {
    if t_finish <= dt * (1.0 + 1e-12) + 1e-12 {
        Advance::Finished { after_s: t_finish.min(dt) }
    } else {
        Advance::Running { progress_s: progress_s + rate * dt }
    }
}

/// A job on a [`LoneGpu`].
#[derive(Debug, Clone, Copy)]
pub struct LoneJob<'a> {
    /// App name (for the interference model).
    pub app: &'a str,
    /// Its profile.
    pub profile: &'a AppProfile,
    /// Progress, s of its own time.
    pub progress_s: f64,
    /// Its rate in the last step; `None` when it had finished before that step.
    pub rate: Option<f64>,
}

impl LoneJob<'_> {
    /// True once it has finished.
    pub fn done(&self) -> bool {
        self.progress_s >= self.profile.solo_s()
    }
}

/// Jobs on one GPU with nothing else happening (no arrivals, no other GPUs), stepped by the
/// simulator's rule. Buffers are reused between steps.
pub struct LoneGpu<'a> {
    gpu: &'a GpuSpec,
    model: &'a dyn Interference,
    /// The jobs, in the order given.
    pub jobs: Vec<LoneJob<'a>>,
    loads: Vec<JobLoad<'a>>,
    index: Vec<usize>,
    rates: Vec<f64>,
    /// The jobs and demands `rates` were computed from (one per stepped job): while they stay
    /// the same, so do the rates, which are not asked again (profiles are often steady for
    /// many steps, and the interference model is a function of the loads alone).
    rated: Vec<(usize, dqngpu_model::Resources)>,
    /// Each stepped job's time to finish at its rate (computed once per step).
    finish: Vec<f64>,
}

impl<'a> LoneGpu<'a> {
    /// `jobs` on `gpu` under `model`.
    pub fn new(gpu: &'a GpuSpec, model: &'a dyn Interference, jobs: Vec<LoneJob<'a>>) -> Self {
        let n = jobs.len();
        LoneGpu {
            gpu,
            model,
            jobs,
            loads: Vec::with_capacity(n),
            index: Vec::with_capacity(n),
            rates: vec![1.0; n],
            rated: Vec::with_capacity(n),
            finish: Vec::with_capacity(n),
        }
    }

    /// One step of at most `max_dt` wall seconds (cut at the first finish); returns its length
    /// (0 when every job had finished). Sets each job's `rate`.
    pub fn step(&mut self, max_dt: f64) -> f64 {
        self.loads.clear();
        self.index.clear();
        for (k, j) in self.jobs.iter_mut().enumerate() {
            j.rate = None;
            if !j.done() {
                self.loads.push(JobLoad { app: j.app, demand: j.profile.demand_at(j.progress_s) });
                self.index.push(k);
            }
        }
        let n = self.loads.len();
        if n == 0 {
            return 0.0;
        }
        let same = self.rated.len() == n
            && self.rated.iter().zip(&self.index).zip(&self.loads).all(|((r, &k), l)| r.0 == k && r.1 == *l.demand);
        if !same {
            gpu_rates(self.model, self.gpu, &self.loads, &mut self.rates[..n]);
            self.rated.clear();
            self.rated.extend(self.index.iter().zip(&self.loads).map(|(&k, l)| (k, *l.demand)));
        }
        self.finish.clear();
        for (&k, &r) in self.index.iter().zip(&self.rates) {
            let j = &self.jobs[k];
            self.finish.push(time_to_finish(j.profile.solo_s() - j.progress_s, r));
        }
        let dt = self.finish.iter().fold(max_dt, |dt, &tf| dt.min(tf));
        for (slot, &k) in self.index.iter().enumerate() {
            let (rate, tf) = (self.rates[slot], self.finish[slot]);
            let j = &mut self.jobs[k];
            j.rate = Some(rate);
            j.progress_s = match advance(j.progress_s, rate, tf, dt) {
                Advance::Running { progress_s } => progress_s,
                Advance::Finished { .. } => j.profile.solo_s(),
            };
        }
        dt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_floored_and_capped() {
        assert_eq!(floor_rate(f64::NAN), RATE_FLOOR);
        assert_eq!(floor_rate(0.0), RATE_FLOOR);
        assert_eq!(floor_rate(-1.0), RATE_FLOOR);
        assert_eq!(floor_rate(2.0), 1.0);
        assert_eq!(floor_rate(0.5), 0.5);
    }

    #[test]
    fn a_finish_within_the_step_ends_it() {
        assert_eq!(advance(10.0, 0.5, 4.0, 4.0), Advance::Finished { after_s: 4.0 });
        assert_eq!(advance(10.0, 0.5, 4.0 + 1e-14, 4.0), Advance::Finished { after_s: 4.0 });
        assert_eq!(advance(10.0, 0.5, 8.0, 4.0), Advance::Running { progress_s: 12.0 });
        assert_eq!(time_to_finish(-1.0, 0.5), 0.0);
    }
}
