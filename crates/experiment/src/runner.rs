//! The evaluation runs: for each class x seed x scheduler, draw the job set and simulate it,
//! in parallel (rayon), in a fixed order so the same seeds give the same results.

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{AppLibrary, ClusterSpec, Policy, WorkloadClass};
use dqngpu_sim::{Arrivals, SimConfig, SimResult};
use indicatif::ProgressBar;
use rayon::prelude::*;

use crate::config::ExperimentConfig;
use crate::error::ExperimentError;
use crate::results::{JobRecord, RunRecord, Timeline};

/// Most points kept in a timeline (longer runs are thinned evenly).
pub const TIMELINE_POINTS: usize = 1500;

/// What every run shares: cluster, library, interference model, simulator settings.
pub struct Setup {
    /// The cluster.
    pub cluster: ClusterSpec,
    /// The app library.
    pub library: AppLibrary,
    /// The interference model.
    pub interference: Arc<dyn Interference>,
    /// Simulator settings.
    pub sim: SimConfig,
    /// How jobs arrive.
    pub arrivals: Arrivals,
    /// `dqngpu-plan`'s search.
    pub plan: dqngpu_rl::scorer::plan::PlanConfig,
}

impl Setup {
    /// Resolves the config's library, cluster and interference model.
    pub fn new(cfg: &ExperimentConfig) -> Result<Self, ExperimentError> {
        let library = dqngpu_model::library::resolve(&cfg.library)?;
        let cluster = match &cfg.cluster.file {
            Some(f) => ClusterSpec::read(std::path::Path::new(f))?,
            None => ClusterSpec::parse_gpus(&cfg.cluster.gpus)?,
        };
        let interference: Arc<dyn Interference> = Arc::from(dqngpu_interference::by_name(&cfg.interference)?);
        let sim = SimConfig {
            step_s: cfg.step_s,
            max_slowdown: cfg.max_slowdown_pct.map(|p| p / 100.0),
            ..SimConfig::default()
        };
        let arrivals = match cfg.workloads.arrival_rate {
            Some(rate_per_s) => Arrivals::Poisson { rate_per_s },
            None => Arrivals::AllAtZero,
        };
        let plan = cfg.plan().map_err(|(field, message)| ExperimentError::Run { what: field.into(), message })?;
        Ok(Setup { cluster, library, interference, sim, arrivals, plan })
    }

    /// The job set of (class, seed).
    pub fn jobset(
        &self,
        class: WorkloadClass,
        jobs: usize,
        seed: u64,
    ) -> Result<dqngpu_model::JobSet, ExperimentError> {
        Ok(dqngpu_sim::draw(&self.library, class, jobs, seed, self.arrivals)?)
    }
}

/// Makes the policy called `name` for a run on job-set `seed`.
pub type PolicyFactory<'a> = dyn Fn(&str, u64) -> Result<Box<dyn Policy + 'a>, ExperimentError> + Sync + 'a;

/// One unit of work.
#[derive(Debug, Clone)]
struct Task {
    class: WorkloadClass,
    seed: u64,
    scheduler: String,
    timeline: bool,
}

/// A usage trace: times (s), GPU utilisation (%), GPU memory (%).
pub type Trace = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Runs `policy` on `jobset`, optionally recording the usage timeline (the simulator's
/// [`SimConfig::record_usage`]: one point before every step, zeros at the end).
pub fn simulate(
    setup: &Setup,
    policy: &dyn Policy,
    jobset: &dqngpu_model::JobSet,
    timeline: bool,
) -> Result<(SimResult, Option<Trace>), dqngpu_sim::SimError> {
    let config = SimConfig { record_usage: timeline, ..setup.sim.clone() };
    let mut res = dqngpu_sim::run(policy, &setup.cluster, &setup.library, jobset, setup.interference.clone(), config)?;
    let trace = res.usage.take().map(|u| (u.t_s, u.gpu_util_pct, u.gpu_mem_pct));
    Ok((res, trace))
}

/// Keeps at most `max` evenly spaced points (always the last, once).
fn thin(t: Vec<f64>, u: Vec<f64>, m: Vec<f64>, max: usize) -> Trace {
    let n = t.len();
    if n <= max || max < 2 {
        return (t, u, m);
    }
    let k = n.div_ceil(max - 1);
    // The last point is added unless the steps already land on it.
    let idx: Vec<usize> = (0..n).step_by(k).chain((!(n - 1).is_multiple_of(k)).then_some(n - 1)).collect();
    let pick = |v: &[f64]| idx.iter().map(|&i| v[i]).collect::<Vec<_>>();
    (pick(&t), pick(&u), pick(&m))
}

/// The record of a finished simulation.
pub fn record(class: WorkloadClass, seed: u64, scheduler: &str, r: &SimResult) -> RunRecord {
    RunRecord {
        workload: class.name().to_string(),
        scheduler: scheduler.to_string(),
        seed,
        makespan_s: r.makespan_s,
        lower_bound_s: r.lower_bound_s,
        jct_lower_bound_s: r.jct_lower_bound_s,
        avg_gpu_util_pct: r.avg_gpu_util_pct,
        avg_gpu_mem_util_pct: r.avg_gpu_mem_util_pct,
        mean_jct_s: r.mean_jct_s,
        slowed_over_10_pct: r.slowed_over_10_pct,
        oom_kills: u32::try_from(r.oom_kills).unwrap_or(u32::MAX),
        slowdown_buckets: r.slowdown_buckets,
        jobs: r
            .jobs
            .iter()
            .map(|j| JobRecord {
                id: j.id,
                app: j.app.clone(),
                gpu: j.gpu,
                submit_s: j.submit_s,
                start_s: j.start_s,
                finish_s: j.finish_s,
                solo_s: j.solo_s,
                exec_slowdown: j.exec_slowdown,
                jct_slowdown: j.jct_slowdown,
                restarts: j.restarts,
            })
            .collect(),
    }
}

/// Evaluates `schedulers` on every class and evaluation seed. Returns the runs in (class,
/// seed, scheduler) order and one timeline per scheduler (focus class, first seed).
pub fn evaluate(
    cfg: &ExperimentConfig,
    setup: &Setup,
    schedulers: &[String],
    make_policy: &PolicyFactory<'_>,
    progress: &ProgressBar,
) -> Result<(Vec<RunRecord>, Vec<Timeline>), ExperimentError> {
    let classes = cfg.classes()?;
    let focus: WorkloadClass = cfg.workloads.focus.parse()?;
    let seeds = cfg.eval_seeds();
    let mut jobsets = Vec::new();
    for &c in &classes {
        for &s in &seeds {
            jobsets.push(((c, s), setup.jobset(c, cfg.workloads.jobs, s)?));
        }
    }
    let first_seed = seeds.first().copied();
    let mut tasks = Vec::new();
    for &class in &classes {
        for &seed in &seeds {
            for s in schedulers {
                let timeline = class == focus && Some(seed) == first_seed;
                tasks.push(Task { class, seed, scheduler: s.clone(), timeline });
            }
        }
    }
    progress.set_length(tasks.len() as u64);
    let out: Vec<Result<(RunRecord, Option<Timeline>), ExperimentError>> = tasks
        .par_iter()
        .map(|t| {
            let what = || format!("{} on {} seed {}", t.scheduler, t.class, t.seed);
            let jobset = &jobsets
                .iter()
                .find(|(k, _)| *k == (t.class, t.seed))
                .ok_or_else(|| ExperimentError::Run { what: what(), message: "job set missing".into() })?
                .1;
            let policy = make_policy(&t.scheduler, t.seed)?;
            let (res, trace) = simulate(setup, policy.as_ref(), jobset, t.timeline)
                .map_err(|source| ExperimentError::Sim { what: what(), source })?;
            let timeline = trace.map(|(ts, u, m)| {
                let (t_s, gpu_util_pct, gpu_mem_pct) = thin(ts, u, m, TIMELINE_POINTS);
                Timeline {
                    workload: t.class.name().into(),
                    scheduler: t.scheduler.clone(),
                    seed: t.seed,
                    t_s,
                    gpu_util_pct,
                    gpu_mem_pct,
                }
            });
            progress.inc(1);
            Ok((record(t.class, t.seed, &t.scheduler, &res), timeline))
        })
        .collect();
    let mut runs = Vec::with_capacity(out.len());
    let mut timelines = Vec::new();
    for r in out {
        let (run, tl) = r?;
        runs.push(run);
        timelines.extend(tl);
    }
    Ok((runs, timelines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_ends_and_bounds_size() {
        let t: Vec<f64> = (0..10_001).map(f64::from).collect();
        let (a, b, _) = thin(t.clone(), t.clone(), t, 1500);
        assert!(a.len() <= 1501, "{}", a.len());
        assert_eq!(a.first(), Some(&0.0));
        assert_eq!(a.last(), Some(&10_000.0));
        assert_eq!(a, b);
        let (a, _, _) = thin(vec![1.0, 2.0], vec![0.0; 2], vec![0.0; 2], 1500);
        assert_eq!(a, vec![1.0, 2.0]);
        // 10,000 points kept every 7th: the 10,000th (index 9,999 = 7 x 1,428 + 3) is added
        // once; 10,001 points every 7th land on the last: it is not repeated.
        for n in [10_000, 10_001, 10_004] {
            let t: Vec<f64> = (0..n).map(f64::from).collect();
            let (a, _, _) = thin(t.clone(), t.clone(), t, 1500);
            assert!(a.windows(2).all(|w| w[0] < w[1]), "a point repeated for n = {n}");
            assert_eq!(a.last(), Some(&f64::from(n - 1)));
        }
    }
}
