//! `dqngpu simulate`: run a job set through the co-location simulator under one scheduler or
//! all of them, and print the metrics as a table or JSON.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use dqngpu_interference::Interference;
use dqngpu_model::error::write_file_atomic;
use dqngpu_model::{library, AppLibrary, ClusterSpec, JobSet, Policy, WorkloadClass};
use dqngpu_rl::scorer::Caller;
use dqngpu_rl::SchedulerName;
use dqngpu_sim::{draw, SimConfig, SimResult, TickTrigger, DEFAULT_JOBS};
use serde::Serialize;

use super::Format;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Draw the job set from this workload class (gpu_heavy, gpu_light, mem_heavy, mem_light, random).
    #[arg(long, conflicts_with = "jobs")]
    pub workload: Option<String>,
    /// Read the job set from this file (`id,app,submit_s` CSV, or JSON) instead of drawing one.
    #[arg(long)]
    pub jobs: Option<PathBuf>,
    /// Scheduler name (any case), or `all` for every heuristic.
    #[arg(long, default_value = "all")]
    pub scheduler: SchedulerChoice,
    /// Checkpoint of a trained RL agent (for `--scheduler dqngpu` and the other RL agents).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Seed of the drawn workload and of the `random` scheduler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Jobs to draw with `--workload` (1 to 1,000,000).
    #[arg(long, default_value_t = DEFAULT_JOBS, value_parser = super::parse_job_count, conflicts_with = "jobs")]
    pub n_jobs: usize,
    /// Poisson arrivals at this rate (jobs per second) for a drawn workload; default all at t = 0.
    #[arg(long, allow_negative_numbers = true, conflicts_with = "jobs")]
    pub arrival_rate: Option<f64>,
    /// The cluster, e.g. `titanxp:1`, `4xtitanxp:2`, `titanxp,t4:2` (nodes x model:GPUs).
    #[arg(long, default_value = "titanxp:1", conflicts_with = "cluster")]
    pub gpus: String,
    /// The cluster as a TOML file (see `ClusterSpec::from_toml`).
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// Interference model: contention, contention-h100 (fitted on an H100, time-sliced), measured or none.
    #[arg(long, default_value = "contention")]
    pub interference: String,
    /// App library: thesis, lucid, `generated:SEED[:COUNT]`, or a directory of profiles (default: the job
    /// file's, else thesis).
    #[arg(long)]
    pub library: Option<String>,
    /// Write the event log here as JSON lines (each line also names its scheduler).
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Simulation step, s.
    #[arg(long, allow_negative_numbers = true, default_value_t = SimConfig::default().step_s)]
    pub step_s: f64,
    /// While jobs wait, ask the scheduler again at least this often, s.
    #[arg(long, allow_negative_numbers = true, default_value_t = SimConfig::default().decision_tick_s)]
    pub decision_tick_s: f64,
    /// What makes the decision tick ask: peak-drop (a running job passed its remaining peak),
    /// demand-drop (a running job's demand dropped) or always. The thesis's DqnGPU agent
    /// (`--algorithm thesis`), and every policy told a slowdown budget (every sharing rule,
    /// dqngpu, dqngpu-plan), are asked at every tick whatever this says (tetris and greedy
    /// only under a budget).
    #[arg(long, value_enum, default_value_t = Trigger::PeakDrop)]
    pub tick_trigger: Trigger,
    /// Slowdown budget for every scheduler, percent, or `off`: a group of jobs predicted by
    /// the interference model to slow any job on its GPU by more than this is not started.
    #[arg(long, allow_negative_numbers = true, default_value = "off")]
    pub max_slowdown: String,
    /// dqngpu-plan's search settings.
    #[command(flatten)]
    pub plan: super::PlanArgs,
}

/// `--tick-trigger` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// A running job passed its remaining peak in some resource.
    PeakDrop,
    /// A running job's current demand dropped in some resource.
    DemandDrop,
    /// Every tick while jobs wait.
    Always,
}

impl From<Trigger> for TickTrigger {
    fn from(t: Trigger) -> Self {
        match t {
            Trigger::PeakDrop => TickTrigger::PeakDrop,
            Trigger::DemandDrop => TickTrigger::DemandDrop,
            Trigger::Always => TickTrigger::Always,
        }
    }
}

/// One scheduler's result as `--format json` prints it.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The workload class, or the job file.
    pub workload: String,
    /// The seed the job set was drawn with: `--seed` for a drawn set, a job file's recorded
    /// seed, `null` for a file that records none.
    pub seed: Option<u64>,
    /// App library.
    pub library: String,
    /// Number of GPUs.
    pub gpus: usize,
    /// Every other setting that changes the results, so that a file says how to reproduce it.
    pub settings: Settings,
    /// The metrics and per-job records.
    #[serde(flatten)]
    pub result: SimResult,
}

/// The run's settings beyond the workload, library and GPU count.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// `--seed`: it draws the workload (unless read from a file) and seeds the `random` scheduler.
    pub seed_flag: u64,
    /// The job file, when the set was read from one.
    pub jobs_file: Option<String>,
    /// The cluster: the `--gpus` spec, or the `--cluster` file.
    pub cluster: String,
    /// Its GPUs' models, in index order.
    pub gpu_models: Vec<String>,
    /// Poisson arrivals (jobs/s) of a drawn set; `null`: all at t = 0 (or the file's times).
    pub arrival_rate: Option<f64>,
    /// The slowdown budget, percent; `null`: off.
    pub max_slowdown_pct: Option<f64>,
    /// Interference model.
    pub interference: String,
    /// Simulation step, s.
    pub step_s: f64,
    /// Decision tick, s.
    pub decision_tick_s: f64,
    /// What makes the tick ask.
    pub tick_trigger: String,
    /// The agent's checkpoint, if any.
    pub model: Option<String>,
    /// dqngpu-plan's rows and guard, when set.
    pub plan_rows: Option<usize>,
    /// dqngpu-plan's guard weight, when set.
    pub plan_guard: Option<f64>,
}

/// `--scheduler`: one scheduler, or `all` (every heuristic; agents need `--model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerChoice {
    /// Every heuristic.
    All,
    /// This one.
    One(SchedulerName),
}

impl std::str::FromStr for SchedulerChoice {
    type Err = dqngpu_model::ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("all") {
            Ok(SchedulerChoice::All)
        } else {
            s.parse().map(SchedulerChoice::One)
        }
    }
}

impl SchedulerChoice {
    /// The schedulers chosen.
    pub fn names(self) -> Vec<SchedulerName> {
        match self {
            SchedulerChoice::All => SchedulerName::heuristics(),
            SchedulerChoice::One(n) => vec![n],
        }
    }
}

/// The policy `name` resolves to: a heuristic, or an RL agent loaded from `model` (the
/// scorer choosing within what `caller` admits: the budget the simulator or the service
/// applies, under the interference model it steps GPUs with).
/// `plan` sets `dqngpu-plan`'s search (refused for any other scheduler).
pub fn resolve_scheduler(
    name: SchedulerName,
    model: Option<&Path>,
    seed: u64,
    caller: &Caller,
    plan: Option<dqngpu_rl::scorer::plan::PlanConfig>,
) -> anyhow::Result<Box<dyn Policy>> {
    Ok(name.resolve_planned(model, seed, caller, plan)?)
}

/// The cluster a command's `--gpus` / `--cluster` flags describe.
pub fn cluster(gpus: &str, file: Option<&Path>) -> anyhow::Result<ClusterSpec> {
    Ok(match file {
        Some(path) => ClusterSpec::read(path)?,
        None => ClusterSpec::parse_gpus(gpus)?,
    })
}

/// The job set and app library the flags describe, with the workload's name.
fn job_set(args: &Args) -> anyhow::Result<(JobSet, AppLibrary, String)> {
    match &args.jobs {
        Some(path) => {
            let set = JobSet::read(path)?;
            let lib = match (&args.library, &set.library) {
                (Some(name), _) => library::resolve(name)?,
                (None, Some(name)) => {
                    library::resolve(&library::named_in(path.parent().unwrap_or(Path::new("")), name))
                        .with_context(|| format!("the library job file {} names", path.display()))?
                }
                (None, None) => library::resolve("thesis")?,
            };
            // Named here, where the file is known: the simulator would name the app alone.
            for (i, job) in set.jobs.iter().enumerate() {
                lib.get(&job.app).with_context(|| {
                    format!("{}: job {} (the job set's job {} of {})", path.display(), job.id, i + 1, set.jobs.len())
                })?;
            }
            Ok((set, lib, path.display().to_string()))
        }
        None => {
            let class_name = args.workload.as_deref().unwrap_or("random");
            let class: WorkloadClass = class_name.parse()?;
            let lib = library::resolve(args.library.as_deref().unwrap_or("thesis"))?;
            let arrivals = super::workload::arrivals(args.arrival_rate);
            let set = draw(&lib, class, args.n_jobs, args.seed, arrivals)?;
            Ok((set, lib, class.name().to_string()))
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(events) = &args.events {
        let inputs: Vec<(&str, &Path)> =
            [("--jobs", &args.jobs), ("--cluster", &args.cluster), ("--model", &args.model)]
                .into_iter()
                .filter_map(|(flag, p)| Some((flag, p.as_deref()?)))
                .collect();
        super::refuse_output_over_input("--events", events, &inputs)?;
    }
    let cluster = cluster(&args.gpus, args.cluster.as_deref())?;
    let (set, lib, workload) = job_set(&args)?;
    let interference: Arc<dyn Interference> = Arc::from(dqngpu_interference::by_name(&args.interference)?);
    if args.interference == "measured" {
        warn_measured_coverage(&set, &lib)?;
    }
    let max_slowdown = super::parse_max_slowdown(&args.max_slowdown)?;
    let config = SimConfig {
        step_s: args.step_s,
        decision_tick_s: args.decision_tick_s,
        tick_trigger: args.tick_trigger.into(),
        record_events: args.events.is_some(),
        max_slowdown,
        ..SimConfig::default()
    };
    // The agents' and the rules' budget predictions step as this run does.
    let caller = Caller::for_config(&config, interference.clone());
    let plan = args.plan.config()?;
    if let (SchedulerChoice::All, Some(m)) = (args.scheduler, &args.model) {
        anyhow::bail!(
            "--model {}: `--scheduler all` runs the heuristics, which take no model; name an agent (dqngpu, dqngpu-plan, deeprm-max, deeprm-mean) to run it",
            m.display()
        );
    }
    // Resolve every scheduler before simulating, so a missing model fails fast.
    let policies = args
        .scheduler
        .names()
        .into_iter()
        .map(|n| resolve_scheduler(n, args.model.as_deref(), args.seed, &caller, plan))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let settings = Settings {
        seed_flag: args.seed,
        jobs_file: args.jobs.as_ref().map(|p| p.display().to_string()),
        cluster: args.cluster.as_ref().map_or_else(|| args.gpus.clone(), |p| p.display().to_string()),
        gpu_models: cluster.gpus().iter().map(|g| g.spec.name.clone()).collect(),
        arrival_rate: args.arrival_rate,
        max_slowdown_pct: max_slowdown.map(|f| f * 100.0),
        interference: args.interference.clone(),
        step_s: config.step_s,
        decision_tick_s: config.decision_tick_s,
        tick_trigger: clap::ValueEnum::to_possible_value(&args.tick_trigger)
            .map_or_else(String::new, |v| v.get_name().to_string()),
        model: args.model.as_ref().map(|p| p.display().to_string()),
        plan_rows: plan.map(|p| p.top_k),
        plan_guard: plan.map(|p| p.makespan_guard),
    };
    warn_on_skipped_samples(config.step_s, &lib, &set);
    let mut reports = Vec::with_capacity(policies.len());
    let mut log = String::new();
    for policy in &policies {
        let mut result = dqngpu_sim::run(policy.as_ref(), &cluster, &lib, &set, interference.clone(), config.clone())
            .with_context(|| format!("simulating `{workload}` under `{}`", policy.name()))?;
        for e in std::mem::take(&mut result.events) {
            let mut v = serde_json::to_value(&e)?;
            if let Some(obj) = v.as_object_mut() {
                obj.insert("scheduler".into(), policy.name().into());
            }
            log.push_str(&v.to_string());
            log.push('\n');
        }
        reports.push(Report {
            workload: workload.clone(),
            seed: if args.jobs.is_some() { set.seed } else { Some(args.seed) },
            library: lib.name.clone(),
            gpus: cluster.gpus().len(),
            settings: settings.clone(),
            result,
        });
    }
    if let Some(path) = &args.events {
        write_file_atomic(path, log.as_bytes()).with_context(|| format!("writing the event log {}", path.display()))?;
    }
    match args.format {
        Format::Json if reports.len() == 1 => println!("{}", serde_json::to_string_pretty(&reports[0])?),
        Format::Json => println!("{}", serde_json::to_string_pretty(&reports)?),
        Format::Table => print!("{}", table(&reports, &args.interference)),
    }
    Ok(())
}

/// Warns when a step is longer than some job's profile interval: samples are skipped.
fn warn_on_skipped_samples(step_s: f64, lib: &AppLibrary, set: &JobSet) {
    let intervals = set.jobs.iter().filter_map(|j| lib.get(&j.app).ok()).map(|p| p.interval_s);
    if let Some(why) = dqngpu_sim::skipped_samples(step_s, intervals) {
        eprintln!("warning: --step-s {why}");
    }
}

/// `measured` knows only the pairs of its table (Lucid's configurations): every other pair, and
/// every group of three or more, is `contention`'s prediction. Said on stderr, with how many of
/// the job set's apps the table holds, so a run labelled "measured" whose apps it never saw is
/// not read as a measurement (it gave `contention`'s figures to the last digit).
fn warn_measured_coverage(set: &dqngpu_model::JobSet, lib: &dqngpu_model::AppLibrary) -> anyhow::Result<()> {
    let measured = dqngpu_interference::Measured::builtin()?;
    let apps: std::collections::BTreeSet<&str> = set.jobs.iter().map(|j| j.app.as_str()).collect();
    let known = apps.iter().filter(|a| measured.table().knows(a)).count();
    eprintln!(
        "note: interference `measured` holds {known} of the {} apps of this job set (library {}) in its pair table; \
         the other pairs, and groups of three or more on a GPU, are predicted by `contention`",
        apps.len(),
        lib.name
    );
    Ok(())
}

/// The human-readable summary.
fn table(reports: &[Report], interference: &str) -> String {
    let mut s = String::new();
    if let Some(r) = reports.first() {
        let st = &r.settings;
        let seed = match (r.seed, &st.jobs_file) {
            (Some(seed), None) => format!("seed {seed}"),
            (Some(seed), Some(_)) => format!("drawn with seed {seed}"),
            (None, _) => "seed not recorded".into(),
        };
        let arrivals = st.arrival_rate.map_or_else(|| "as given".to_string(), |r| format!("Poisson {r}/s"));
        let budget = st.max_slowdown_pct.map_or_else(|| "off".to_string(), |b| format!("{b}%"));
        s.push_str(&format!(
            "workload {} ({} jobs, {seed}), library {}, {} GPU(s) ({}), interference {interference}\n\
             arrivals {arrivals}, max slowdown {budget}, step {} s, decision tick {} s ({}), --seed {}{}\n\
             mean-JCT lower bound {:.1} s (docs/SIMULATOR.md; jct/bnd: mean JCT over it); bound_s is the makespan's\n",
            r.workload,
            r.result.jobs.len(),
            r.library,
            r.gpus,
            st.cluster,
            st.step_s,
            st.decision_tick_s,
            st.tick_trigger,
            st.seed_flag,
            st.model.as_ref().map(|m| format!(", model {m}")).unwrap_or_default(),
            r.result.jct_lower_bound_s
        ));
    }
    s.push_str(&format!(
        "{:<12} {:>11} {:>7} {:>11} {:>10} {:>10} {:>6} {:>8} {:>8} {:>4} {:>5} {:>5} {:>6} {:>5}\n",
        "scheduler",
        "mean_jct_s",
        "jct/bnd",
        "makespan_s",
        "slowed>10%",
        "bound_s",
        "ratio",
        "gpu_%",
        "mem_%",
        "oom",
        "none",
        "<10%",
        "10-20%",
        ">=20%"
    ));
    for r in reports {
        let m = &r.result;
        let b = &m.slowdown_buckets;
        s.push_str(&format!(
            "{:<12} {:>11.1} {:>7.3} {:>11.1} {:>9.1}% {:>10.1} {:>6.3} {:>8.2} {:>8.2} {:>4} {:>5} {:>5} {:>6} {:>5}\n",
            m.scheduler,
            m.mean_jct_s,
            if m.jct_lower_bound_s > 0.0 { m.mean_jct_s / m.jct_lower_bound_s } else { f64::NAN },
            m.makespan_s,
            m.slowed_over_10_pct,
            m.lower_bound_s,
            m.makespan_over_bound,
            m.avg_gpu_util_pct,
            m.avg_gpu_mem_util_pct,
            m.oom_kills,
            b.none,
            b.lt10,
            b.from10to20,
            b.ge20
        ));
    }
    s
}
