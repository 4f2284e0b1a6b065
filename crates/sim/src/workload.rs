//! Drawing job sets from a workload class (thesis Section V.1): uniform over the class's apps,
//! submitted all at t = 0 or with Poisson arrivals, every choice from one seed.

use dqngpu_model::{AppLibrary, JobSet, JobSpec, Location, ModelError, WorkloadClass};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The thesis's job-set size.
pub const DEFAULT_JOBS: usize = 30;

/// The most jobs one drawn set may hold: far past any cluster trace here (Alibaba's has about
/// 8,000 pods), and small enough that a typo (`--n-jobs 1000000000`) is refused at once
/// instead of filling memory.
pub const MAX_DRAWN_JOBS: usize = 1_000_000;

/// When the jobs of a drawn set are submitted.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Arrivals {
    /// Every job at t = 0 (the thesis's setting).
    #[default]
    AllAtZero,
    /// A Poisson process with this rate, jobs per second: exponential gaps, the first job at
    /// the first gap.
    Poisson {
        /// Jobs per second (> 0).
        rate_per_s: f64,
    },
}

/// Draws `n_jobs` jobs uniformly (with replacement) from `class`'s apps in `library`.
///
/// Ids are 0..n_jobs. The app choices come first from the seeded stream, then the arrival
/// gaps, so the same seed gives the same apps whatever the arrival process. Submit times are
/// rounded to the millisecond so they survive a CSV round trip exactly.
pub fn draw(
    library: &AppLibrary,
    class: WorkloadClass,
    n_jobs: usize,
    seed: u64,
    arrivals: Arrivals,
) -> Result<JobSet, ModelError> {
    let bad = |field: &str, msg: String| {
        ModelError::invalid(Location { field: Some(field.to_string()), ..Default::default() }, msg)
    };
    if n_jobs == 0 {
        return Err(bad("jobs", "a job set needs at least one job".into()));
    }
    if n_jobs > MAX_DRAWN_JOBS {
        return Err(bad("jobs", format!("at most {MAX_DRAWN_JOBS} jobs can be drawn, got {n_jobs}")));
    }
    if let Arrivals::Poisson { rate_per_s } = arrivals {
        if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
            return Err(bad("--arrival-rate", format!("{rate_per_s} is not a positive rate (jobs per second)")));
        }
    }
    let members = library.class_members(class)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let apps: Vec<String> = (0..n_jobs).map(|_| members[rng.gen_range(0..members.len())].clone()).collect();
    let mut t = 0.0_f64;
    let jobs = apps
        .into_iter()
        .enumerate()
        .map(|(i, app)| {
            let submit_s = match arrivals {
                Arrivals::AllAtZero => 0.0,
                Arrivals::Poisson { rate_per_s } => {
                    // Inverse transform of Exp(rate); 1 - u is in (0, 1], so ln is finite.
                    let u: f64 = rng.gen();
                    t += -(1.0 - u).ln() / rate_per_s;
                    (t * 1000.0).round() / 1000.0
                }
            };
            JobSpec { id: i as u64, app, submit_s }
        })
        .collect::<Vec<_>>();
    // A rate so low that the last job would arrive past the clock's usable range.
    if let Some(last) = jobs.last().filter(|j| j.submit_s > dqngpu_model::job::MAX_SUBMIT_S) {
        return Err(bad(
            "--arrival-rate",
            format!(
                "{} puts the last of {n_jobs} jobs at {:?} s, past the latest submission time ({:?} s)",
                match arrivals {
                    Arrivals::Poisson { rate_per_s } => format!("{rate_per_s:?} jobs per second"),
                    Arrivals::AllAtZero => "this arrival process".into(),
                },
                last.submit_s,
                dqngpu_model::job::MAX_SUBMIT_S
            ),
        ));
    }
    Ok(JobSet { library: Some(library.name.clone()), class: Some(class), seed: Some(seed), jobs })
}
