//! The slowdown guard: before DqnGPU places a group of jobs on a GPU, it predicts with the
//! contention model how much slower than alone every job there would finish, and how much
//! memory they would hold at each moment, if nothing else joined them. A group that would
//! push any job past `max_slowdown`, or the memory past the card, is masked out.
//!
//! Why: the thesis's agent weighs only the makespan, so it learns to pack jobs that slow each
//! other down a lot; operators want co-location that does not slow jobs ("without slowing
//! any job much"). The prediction is a small simulation of the jobs on this GPU alone, with
//! the simulator's own stepping rule (the slowdown budget's [`dqngpu_sim::budget::predict`]). Because interference stretches jobs
//! differently, memory phases drift apart from the rate-1 alignment the images assume; the
//! prediction follows that drift, which is what the row-by-row memory check cannot do.
//! Jobs placed later on the same GPU are checked again then, against what the residents have
//! already lost, so the bound holds for every job unless the model is wrong.

use dqngpu_interference::{Contention, ContentionParams};
use dqngpu_model::GpuSpec;
use serde::{Deserialize, Serialize};

/// The guard's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlowdownGuard {
    /// Largest predicted execution slowdown allowed for any job, as a fraction (0.02: every
    /// job finishes within 2% of its solo time, the thesis's "no slowdown" bucket).
    pub max_slowdown: f64,
    /// The contention model the prediction uses (the fit to the Lucid pairs by default).
    pub model: ContentionParams,
    /// The prediction's step, wall seconds: demands at a step's start hold for the step.
    #[serde(default = "default_step_s")]
    pub step_s: f64,
}

/// One second: the simulator's own step, so in simulation the prediction is what the
/// simulator will do (test `slowdown_guard_predicts_what_the_simulator_measures`).
fn default_step_s() -> f64 {
    1.0
}

impl Default for SlowdownGuard {
    fn default() -> Self {
        SlowdownGuard { max_slowdown: 0.02, model: ContentionParams::FITTED, step_s: default_step_s() }
    }
}

/// A job as the guard sees it (the budget's own type: one prediction for both).
pub type GuardJob<'a> = dqngpu_sim::budget::BudgetJob<'a>;

pub use dqngpu_sim::budget::Prediction;

impl SlowdownGuard {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), crate::RlError> {
        if !(self.max_slowdown.is_finite() && self.max_slowdown >= 0.0) {
            return Err(crate::RlError::Config {
                field: "max_slowdown",
                message: format!("must be a fraction >= 0, got {}", self.max_slowdown),
            });
        }
        if !(self.step_s.is_finite() && self.step_s > 0.0) {
            return Err(crate::RlError::Config {
                field: "guard step_s",
                message: format!("must be a positive number of seconds, got {}", self.step_s),
            });
        }
        Ok(())
    }

    /// Predicts `jobs` running together on `gpu` until all finish (stopping early once the
    /// answer is no), with [`dqngpu_sim::budget::predict`] under this guard's contention model.
    pub fn predict(&self, gpu: &GpuSpec, jobs: &[GuardJob<'_>]) -> Prediction {
        dqngpu_sim::budget::predict(gpu, &Contention::new(self.model), jobs, self.max_slowdown, 0.0, self.step_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dqngpu_model::{AppInfo, AppProfile, Resources};

    fn gpu() -> GpuSpec {
        dqngpu_model::gpu::lookup("titanxp").unwrap_or_else(|e| panic!("{e}"))
    }

    fn profile(name: &str, phases: &[(usize, f64, f64)]) -> AppProfile {
        let mut samples = Vec::new();
        for &(secs, util, mem) in phases {
            samples.extend(std::iter::repeat_n(Resources::new(util, mem, util, 100.0), secs));
        }
        AppProfile::new(AppInfo { name: name.into(), ..Default::default() }, 1.0, samples)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn job<'a>(p: &'a AppProfile, progress_s: f64, lost_s: f64) -> GuardJob<'a> {
        GuardJob { app: &p.app.name, profile: p, progress_s, lost_s }
    }

    #[test]
    fn a_lone_job_is_never_slowed() {
        let p = profile("a", &[(50, 100.0, 1000.0), (50, 10.0, 500.0)]);
        let r = SlowdownGuard::default().predict(&gpu(), &[job(&p, 0.0, 0.0)]);
        assert!(r.admitted && r.worst_slowdown == 0.0, "{r:?}");
    }

    #[test]
    fn two_light_jobs_pass_two_heavy_ones_do_not() {
        // 0.1841 x 0.3 x 0.3 = 1.7% < 2%; 0.1841 x 0.8 x 0.8 = 11.8% plus over-subscription.
        let light = profile("light", &[(100, 30.0, 500.0)]);
        let heavy = profile("heavy", &[(100, 80.0, 500.0)]);
        let g = SlowdownGuard::default();
        let ok = g.predict(&gpu(), &[job(&light, 0.0, 0.0), job(&light, 0.0, 0.0)]);
        assert!(ok.admitted, "{ok:?}");
        assert!((ok.worst_slowdown - 0.1841 * 0.09).abs() < 1e-6, "{ok:?}");
        let bad = g.predict(&gpu(), &[job(&heavy, 0.0, 0.0), job(&heavy, 0.0, 0.0)]);
        assert!(!bad.admitted && bad.worst_slowdown > 0.02, "{bad:?}");
    }

    #[test]
    fn a_short_overlap_at_the_end_of_a_run_is_admitted() {
        // Heavy pair: 11.8%+ slower while together, but only for the last 10 s of a 100 s
        // job and the first 10 s of the other: under 2% of either run.
        let heavy = profile("heavy", &[(100, 80.0, 500.0)]);
        let g = SlowdownGuard::default();
        let tail = g.predict(&gpu(), &[job(&heavy, 95.0, 0.0), job(&heavy, 0.0, 0.0)]);
        assert!(tail.admitted && tail.worst_slowdown > 0.0, "{tail:?}");
        let early = g.predict(&gpu(), &[job(&heavy, 50.0, 0.0), job(&heavy, 0.0, 0.0)]);
        assert!(!early.admitted, "{early:?}");
    }

    #[test]
    fn time_already_lost_counts() {
        let light = profile("light", &[(100, 30.0, 500.0)]);
        let g = SlowdownGuard::default();
        let fresh = g.predict(&gpu(), &[job(&light, 0.0, 0.0), job(&light, 0.0, 0.0)]);
        let tired = g.predict(&gpu(), &[job(&light, 0.0, 1.0), job(&light, 0.0, 0.0)]);
        assert!(fresh.admitted && !tired.admitted, "{fresh:?} {tired:?}");
    }

    #[test]
    fn memory_phases_that_drift_into_each_other_are_caught() {
        // Both fit by rows at rate 1 (a's peak is over before b's starts), but if a were slowed
        // they would overlap; here they are not slowed (idle compute), so they pass; with a
        // memory peak coinciding at the start they do not.
        let a = profile("a", &[(20, 0.0, 8000.0), (80, 0.0, 1000.0)]);
        let b = profile("b", &[(30, 0.0, 1000.0), (70, 0.0, 8000.0)]);
        let g = SlowdownGuard::default();
        assert!(g.predict(&gpu(), &[job(&a, 0.0, 0.0), job(&b, 0.0, 0.0)]).admitted);
        let r = g.predict(&gpu(), &[job(&b, 40.0, 0.0), job(&a, 0.0, 0.0)]);
        assert!(!r.admitted && r.memory_over, "{r:?}");
    }

    #[test]
    fn bad_settings_are_refused() {
        let g = SlowdownGuard { max_slowdown: f64::NAN, ..Default::default() };
        assert!(g.validate().is_err());
        assert!(SlowdownGuard::default().validate().is_ok());
    }
}
