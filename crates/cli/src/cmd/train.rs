//! `dqngpu train`: train DqnGPU (the generalising scorer by default, or the thesis's image
//! agent with `--algorithm thesis`) or DeepRM Max / Mean on the simulator.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args as ClapArgs;
use dqngpu_model::{ClusterSpec, WorkloadClass};
use dqngpu_rl::checkpoint::{self, CheckpointMeta, Encoding, FORMAT_VERSION};
use dqngpu_rl::gpu::{self, AgentKind, GpuEncoding};
use dqngpu_rl::net::OptimizerKind;
use dqngpu_rl::progress::{write_curve, TrainProgress};
use dqngpu_rl::reinforce::{Objective, Schedule, TrainConfig};
use dqngpu_rl::RlError;

/// Arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Agent: dqngpu, deeprm-max or deeprm-mean (any case).
    #[arg(long, default_value = "dqngpu")]
    agent: AgentKind,
    /// How dqngpu learns: `scorer` (a candidate scorer over usage features with weights shared
    /// across jobs and GPUs; imitation of the best rule, look-ahead expert iteration, policy
    /// gradient; docs/RL.md) or `thesis` (the thesis's image state, combination actions and
    /// REINFORCE, as published) [default: scorer]. DeepRM Max / Mean train with `thesis`
    /// only.
    #[arg(long)]
    algorithm: Option<String>,
    /// Workload class of the training job sets (gpu_heavy, gpu_light, mem_heavy, mem_light,
    /// random), or `all` to cycle through the five.
    #[arg(long, default_value = "all")]
    workload: String,
    /// App libraries, comma-separated: `thesis`, `lucid`, `generated:SEED[:COUNT]` or a
    /// directory of profiles. Default: `thesis` for `--algorithm thesis`; for the scorer, its
    /// default training distribution (docs/RL.md: the thesis's, Lucid's and fifteen generated
    /// libraries on three clusters), unless any of --library, --gpus, --jobs, --arrival-rate
    /// is given, which makes one setting of them (defaults: the thesis library and six
    /// generated ones, one Titan Xp, 30 jobs at t = 0), trained alone or, with
    /// --add-to-defaults, beside the default distribution.
    #[arg(long)]
    library: Option<String>,
    /// Jobs per training job set (default 30; 1 to 1,000,000).
    #[arg(long, value_parser = super::parse_job_count)]
    jobs: Option<usize>,
    /// Poisson arrivals at this rate (jobs/s) in the training job sets (scorer only); default:
    /// all jobs at t = 0, the thesis's setting.
    #[arg(long, allow_negative_numbers = true)]
    arrival_rate: Option<f64>,
    /// Cluster, e.g. `titanxp:1` or `4xtitanxp:2` (default `titanxp:1`).
    #[arg(long)]
    gpus: Option<String>,
    /// Interference model.
    #[arg(long, default_value = "contention")]
    interference: String,
    /// What training minimises: `jct` (mean job completion time; reward -(jobs in the system)
    /// x dt per step) or `makespan` (the thesis's; reward -dt per step).
    #[arg(long, default_value = "jct")]
    objective: String,
    /// Iterations; 0 writes the untrained model (initial weights, same architecture and masks).
    #[arg(long, default_value_t = 60)]
    iterations: usize,
    /// Training job sets: per library for the scorer (default 5; seeds 100000 + SEED*1000 +
    /// i), in all for `thesis` (default 10; seeds 300000 + SEED*1000 + i). 1 to 10,000.
    #[arg(long, value_parser = super::parse_jobset_count)]
    jobsets: Option<usize>,
    /// Job sets per iteration.
    #[arg(long, default_value_t = 2)]
    jobsets_per_iter: usize,
    /// Scorer only: improvement rounds after policy gradient (look-ahead labels played out
    /// with the trained scorer, then policy gradient again; docs/RL.md). Default 1; each
    /// adds about the look-ahead's time.
    #[arg(long)]
    improvement_rounds: Option<usize>,
    /// Scorer only, under `--objective jct`: weight of the makespan guard (a run is charged
    /// W x the best rule's mean JCT per share of makespan more than 1% over the best rule's;
    /// docs/RL.md). Default 1; 0 trains on mean JCT alone.
    #[arg(long, allow_negative_numbers = true)]
    makespan_guard: Option<f64>,
    /// Scorer only: trainings from other initial weights on the same sets; the one best on
    /// validation is kept (docs/RL.md). Default 1; each adds about a training's time.
    #[arg(long)]
    restarts: Option<usize>,
    /// Scorer only: near-tie of the improvement rounds' look-ahead labels, in percent (rows
    /// within it of the cheapest count as tied and the lower makespan decides; docs/RL.md).
    /// Default 1; 0 labels only the cheapest rows (more pairs 5% better, fewer within both
    /// of issue 10's lines).
    #[arg(long, allow_negative_numbers = true)]
    improvement_near_tie: Option<f64>,
    /// Scorer only, with --library/--gpus/--jobs/--arrival-rate: train on that setting *and*
    /// the default distribution (docs/RL.md), not on that setting alone; --jobsets then
    /// applies to that setting only. For apps of one's own, it keeps what the default
    /// distribution teaches about apps never seen.
    #[arg(long)]
    add_to_defaults: bool,
    /// Episodes per job set per iteration (the baseline's N).
    #[arg(long, default_value_t = 8)]
    episodes: usize,
    /// Learning rate (default 1e-3 for the scorer, 3e-3 for `thesis`).
    #[arg(long, allow_negative_numbers = true)]
    lr: Option<f64>,
    /// Optimiser.
    #[arg(long, value_enum, ignore_case = true, default_value_t = OptimizerKind::Adam)]
    optimizer: OptimizerKind,
    /// Hidden layer sizes, comma-separated (default 32,16 for the scorer, 20 for `thesis`).
    #[arg(long, value_delimiter = ',')]
    hidden: Option<Vec<usize>>,
    /// Waiting-job slots M.
    #[arg(long, default_value_t = 5)]
    slots: usize,
    /// Image rows T.
    #[arg(long, default_value_t = 20)]
    horizon: usize,
    /// Seconds of profile time per image row.
    #[arg(long, allow_negative_numbers = true, default_value_t = 15.0)]
    row_s: f64,
    /// Cells per resource in the images.
    #[arg(long, default_value_t = 10)]
    res_slots: usize,
    /// Slowdown budget. Scorer: the simulator's budget for every policy (`simulate
    /// --max-slowdown`), applied in training as it will be in use; default off. `thesis`:
    /// DqnGPU's own guard, masking groups predicted (contention model) to slow any job on the
    /// GPU by more than this many percent, or `off` (the thesis's agent); default 2 for dqngpu,
    /// off for deeprm-max / deeprm-mean.
    #[arg(long, allow_negative_numbers = true, value_name = "PCT|off")]
    max_slowdown: Option<String>,
    /// Seed of the training job sets, the initial weights and the sampled actions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds of wall time.
    #[arg(long, allow_negative_numbers = true)]
    time_limit_s: Option<f64>,
    /// Training-curve CSV.
    #[arg(long)]
    curve: Option<PathBuf>,
    /// Hide the progress bar.
    #[arg(long)]
    quiet: bool,
    /// Output weights (safetensors); the metadata goes beside it as .json.
    #[arg(short = 'o', long)]
    output: PathBuf,
}

/// A training check's error, named by the flag that sets its field.
fn in_flags(e: RlError) -> anyhow::Error {
    match e {
        RlError::Config { field, message } => {
            let flag = match field {
                "lr" => "--lr",
                "episodes" => "--episodes",
                "jobsets_per_iter" => "--jobsets-per-iter",
                "hidden" => "--hidden",
                "time_limit_s" => "--time-limit-s",
                other => other,
            };
            anyhow::anyhow!("{flag}: {message}")
        }
        other => other.into(),
    }
}

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<()> {
    // Before training: a run must not end in "cannot save".
    checkpoint::check_path(&a.output).with_context(|| format!("--output {}", a.output.display()))?;
    Schedule { time_limit_s: a.time_limit_s, ..Schedule::default() }.validate().map_err(in_flags)?;
    let agent = a.agent;
    let algorithm = a.algorithm.as_deref().map(|x| x.trim().to_ascii_lowercase());
    let scorer = match algorithm.as_deref().unwrap_or("scorer") {
        // Asked for by name, the scorer is dqngpu's alone: DeepRM would train as the thesis.
        "scorer" if algorithm.is_some() && agent != AgentKind::Dqngpu => {
            anyhow::bail!(
                "--algorithm scorer trains dqngpu only; {} trains with the thesis's algorithm (drop --algorithm, or give --algorithm thesis)",
                agent.name()
            )
        }
        "scorer" => agent == AgentKind::Dqngpu,
        "thesis" => false,
        other => {
            return Err(dqngpu_model::ModelError::UnknownName {
                what: "algorithm",
                name: other.to_string(),
                valid: vec!["scorer".into(), "thesis".into()],
            }
            .into())
        }
    };
    if scorer {
        return run_scorer(a);
    }
    if a.jobs.is_some_and(|j| j != gpu::JOBS_PER_SET) {
        anyhow::bail!(
            "--jobs sizes the scorer's job sets; `--algorithm thesis` trains on sets of {}",
            gpu::JOBS_PER_SET
        );
    }
    if a.arrival_rate.is_some() {
        anyhow::bail!(
            "--arrival-rate trains the scorer only; `--algorithm thesis` trains on job sets with all jobs at t = 0"
        );
    }
    if a.improvement_rounds.is_some() {
        anyhow::bail!(
            "--improvement-rounds is a step of the scorer's training; `--algorithm thesis` has no look-ahead"
        );
    }
    if a.makespan_guard.is_some() {
        anyhow::bail!("--makespan-guard weighs the scorer's look-ahead and rewards; `--algorithm thesis` has neither");
    }
    if a.restarts.is_some() {
        anyhow::bail!("--restarts repeats the scorer's training; `--algorithm thesis` has no validation to choose by");
    }
    if a.improvement_near_tie.is_some() {
        anyhow::bail!(
            "--improvement-near-tie labels the scorer's improvement rounds; `--algorithm thesis` has no look-ahead"
        );
    }
    if a.add_to_defaults {
        anyhow::bail!("--add-to-defaults extends the scorer's training distribution; `--algorithm thesis` has none");
    }
    let library_name = a.library.clone().unwrap_or_else(|| "thesis".into());
    let classes: Vec<WorkloadClass> =
        if a.workload == "all" { WorkloadClass::ALL.to_vec() } else { vec![a.workload.parse::<WorkloadClass>()?] };
    let optimizer = a.optimizer;
    let objective = Objective::from_name(&a.objective).ok_or_else(|| dqngpu_model::ModelError::UnknownName {
        what: "objective",
        name: a.objective.clone(),
        valid: Objective::NAMES.iter().map(|s| s.to_string()).collect(),
    })?;

    let library = dqngpu_model::library::resolve(&library_name)?;
    let gpus = a.gpus.clone().unwrap_or_else(|| "titanxp:1".into());
    let cluster = ClusterSpec::parse_gpus(&gpus)?;
    let interference: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name(&a.interference)?);
    let defaults = GpuEncoding::new(agent);
    let guard = match a.max_slowdown.as_deref() {
        None => defaults.guard,
        Some(s) => {
            super::parse_max_slowdown(s)?.map(|max_slowdown| gpu::SlowdownGuard { max_slowdown, ..Default::default() })
        }
    };
    let enc = GpuEncoding {
        time_horizon: a.horizon,
        row_s: a.row_s,
        res_slots: a.res_slots,
        job_slots: a.slots,
        guard,
        ..defaults
    };
    enc.validate()?;
    let cfg = TrainConfig {
        iterations: a.iterations,
        episodes: a.episodes,
        jobsets_per_iter: a.jobsets_per_iter,
        lr: a.lr.unwrap_or(3e-3),
        optimizer,
        gamma: 1.0,
        hidden: a.hidden.clone().unwrap_or_else(|| vec![20]),
        max_steps: 5000,
        seed: a.seed,
        objective,
    };
    cfg.validate().map_err(in_flags)?;
    let n_sets = a.jobsets.unwrap_or(10);
    let sets = gpu::training_sets(&library, &classes, n_sets, a.seed)?;
    let progress = TrainProgress::new(a.iterations, "makespan_s", !a.quiet);
    let started = std::time::Instant::now();
    let (policy, curve) = gpu::train(&enc, &cluster, &library, interference, sets, &cfg, &mut |s, _| {
        progress.update(s);
        a.time_limit_s.is_none_or(|l| started.elapsed().as_secs_f64() < l)
    })?;
    progress.finish();
    let wall = started.elapsed().as_secs_f64();
    let class_names: Vec<&str> = classes.iter().map(|c| c.name()).collect();
    let meta = CheckpointMeta {
        format: FORMAT_VERSION,
        agent: agent.name().into(),
        encoding: Encoding::Gpu(policy.encoding().clone()),
        hidden: cfg.hidden.clone(),
        train: cfg,
        trained_on: format!(
            "library {}, classes {}, cluster {}, interference {}, {} job sets of {} jobs (seeds {}..{})",
            library_name,
            class_names.join("+"),
            gpus,
            a.interference,
            n_sets,
            gpu::JOBS_PER_SET,
            gpu::train_set_seed(a.seed, 0),
            gpu::train_set_seed(a.seed, n_sets.saturating_sub(1)),
        ),
        iterations_done: curve.len(),
        train_wall_s: wall,
        schedule: None,
        selection: None,
        weights_fnv1a64: None,
    };
    checkpoint::save(&a.output, policy_net(&policy), &meta)
        .with_context(|| format!("saving {}", a.output.display()))?;
    if let Some(path) = &a.curve {
        write_curve(path, &curve)?;
    }
    let (Some(first), Some(last)) = (curve.first().map(|s| s.mean_score), curve.last().map(|s| s.mean_score)) else {
        // `--iterations 0`: the initial weights, same architecture and masks, so anyone can
        // measure what training buys.
        eprintln!("wrote an untrained {} model (no iterations) to {}", agent.name(), a.output.display());
        return Ok(());
    };
    eprintln!(
        "trained {} for {} iterations in {wall:.1} s; training makespan {first:.0} s -> {last:.0} s; wrote {}",
        agent.name(),
        curve.len(),
        a.output.display()
    );
    Ok(())
}

/// The scorer's training: job sets from every library on the cluster, validation sets beside
/// them, the simulator's budget when one is given.
fn run_scorer(a: Args) -> anyhow::Result<()> {
    use dqngpu_rl::scorer::train::{self as st, ScorerRecipe, ScorerTask};
    let classes: Vec<WorkloadClass> =
        if a.workload == "all" { WorkloadClass::ALL.to_vec() } else { vec![a.workload.parse::<WorkloadClass>()?] };
    let objective = Objective::from_name(&a.objective).ok_or_else(|| dqngpu_model::ModelError::UnknownName {
        what: "objective",
        name: a.objective.clone(),
        valid: Objective::NAMES.iter().map(|s| s.to_string()).collect(),
    })?;
    let custom = a.library.is_some() || a.gpus.is_some() || a.jobs.is_some() || a.arrival_rate.is_some();
    let mut settings = if custom {
        vec![st::Setting {
            libraries: match a.library.as_deref() {
                Some(l) => l.split(',').map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect(),
                None => st::single_setting_libraries(),
            },
            gpus: a.gpus.clone().unwrap_or_else(|| "titanxp:1".into()),
            jobs: a.jobs.unwrap_or(gpu::JOBS_PER_SET),
            arrival_rate: a.arrival_rate,
            jobsets: 5,
            max_slowdown_pct: None,
        }]
    } else {
        st::default_settings()
    };
    if a.add_to_defaults && !custom {
        anyhow::bail!(
            "--add-to-defaults adds a setting of --library/--gpus/--jobs/--arrival-rate to the default distribution; \
             none of them is given"
        );
    }
    for s in &mut settings {
        s.jobsets = a.jobsets.unwrap_or(s.jobsets);
    }
    if a.add_to_defaults {
        settings = st::default_settings().into_iter().chain(settings).collect();
    }
    for s in &settings {
        if s.libraries.is_empty() {
            anyhow::bail!("--library: no library named");
        }
        if s.jobs == 0 || s.jobsets == 0 {
            anyhow::bail!("--jobs and --jobsets must be at least 1");
        }
        if let Some(r) = s.arrival_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
            anyhow::bail!("--arrival-rate: expected a positive rate in jobs per second, got {r}");
        }
    }
    let interference: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name(&a.interference)?);
    let mut config = dqngpu_sim::SimConfig::default();
    if let Some(s) = a.max_slowdown.as_deref() {
        config.max_slowdown = super::parse_max_slowdown(s)?;
    }
    let (train, validation) = st::settings_episodes(&settings, &classes, a.seed)?;
    let task = ScorerTask { train, validation, interference, config };
    let cfg = TrainConfig {
        iterations: a.iterations,
        episodes: a.episodes,
        jobsets_per_iter: a.jobsets_per_iter,
        lr: a.lr.unwrap_or(1e-3),
        optimizer: a.optimizer,
        gamma: 1.0,
        hidden: a.hidden.clone().unwrap_or_else(|| vec![32, 16]),
        max_steps: 5000,
        seed: a.seed,
        objective,
    };
    cfg.validate().map_err(in_flags)?;
    let progress = TrainProgress::new(a.iterations, "objective", !a.quiet);
    let started = std::time::Instant::now();
    let defaults = ScorerRecipe::default();
    let makespan_guard = a.makespan_guard.unwrap_or(defaults.makespan_guard);
    if !(makespan_guard.is_finite() && makespan_guard >= 0.0) {
        anyhow::bail!("--makespan-guard {makespan_guard}: expected a weight >= 0 (0 turns the guard off)");
    }
    let restarts = a.restarts.unwrap_or(defaults.restarts);
    if restarts == 0 {
        anyhow::bail!("--restarts 0: at least one training must run");
    }
    let improvement_near_tie = match a.improvement_near_tie {
        None => defaults.improvement_near_tie,
        Some(pct) if pct.is_finite() && (0.0..=100.0).contains(&pct) => pct / 100.0,
        Some(pct) => anyhow::bail!("--improvement-near-tie {pct}: expected a percentage from 0 to 100"),
    };
    let recipe = ScorerRecipe {
        improvement_rounds: a.improvement_rounds.unwrap_or(defaults.improvement_rounds),
        makespan_guard,
        restarts,
        improvement_near_tie,
        ..defaults
    };
    let (policy, report, curve) = st::train(&task, &cfg, &recipe, &mut |s| {
        progress.update(s);
        a.time_limit_s.is_none_or(|l| started.elapsed().as_secs_f64() < l)
    })?;
    progress.finish();
    let wall = started.elapsed().as_secs_f64();
    let class_names: Vec<&str> = classes.iter().map(|c| c.name()).collect();
    let base = st::train_seed_base(a.seed);
    let meta = CheckpointMeta {
        format: FORMAT_VERSION,
        agent: AgentKind::Dqngpu.name().into(),
        encoding: Encoding::Scorer(dqngpu_rl::scorer::ScorerSpec::default()),
        hidden: cfg.hidden.clone(),
        train: cfg,
        trained_on: format!(
            "settings [{}], classes {}, interference {}, training seeds from {base}, budget {}; improvement rounds \
             {} (near-tie {}%), makespan guard {}, restarts {} (validation {}, kept restart {}); teachers {}; \
             validation \
             (objective / best rule's, 1 = as good): best rule {:.4}, untrained {:.4}, imitation {:.4}, kept {:.4} ({})",
            settings
                .iter()
                .map(|s| format!(
                    "libraries {} on {}, {} sets of {} jobs per library, arrivals {}{}",
                    s.libraries.join(","),
                    s.gpus,
                    s.jobsets,
                    s.jobs,
                    s.arrival_rate.map_or("all at t = 0".to_string(), |r| format!("Poisson {r}/s")),
                    s.max_slowdown_pct.map_or(String::new(), |b| format!(", budget {b}%"))
                ))
                .collect::<Vec<_>>()
                .join("; "),
            class_names.join("+"),
            a.interference,
            a.max_slowdown.as_deref().unwrap_or("off"),
            recipe.improvement_rounds,
            recipe.improvement_near_tie * 100.0,
            recipe.makespan_guard,
            recipe.restarts,
            report.restart_validation.iter().map(|v| format!("{v:.4}")).collect::<Vec<_>>().join(", "),
            report.kept_restart,
            report.expert,
            report.expert_validation,
            report.untrained_validation,
            report.imitation_validation,
            report.final_validation,
            report.kept,
        ),
        iterations_done: curve.len(),
        train_wall_s: wall,
        schedule: None,
        selection: None,
        weights_fnv1a64: None,
    };
    checkpoint::save(&a.output, policy.net(), &meta).with_context(|| format!("saving {}", a.output.display()))?;
    if let Some(path) = &a.curve {
        write_curve(path, &curve)?;
    }
    if a.iterations == 0 {
        eprintln!("wrote an untrained dqngpu scorer (no training) to {}", a.output.display());
        return Ok(());
    }
    eprintln!(
        "trained the dqngpu scorer in {wall:.1} s (teachers: {}); validation {} / the best rule's per set: kept \
         {:.3} ({}), the best single rule {:.3}, untrained {:.3}; stages {}; wrote {}",
        report.expert,
        if recipe.makespan_guard > 0.0 && objective == Objective::Jct {
            format!("jct (makespan guard {})", recipe.makespan_guard)
        } else {
            a.objective.clone()
        },
        report.final_validation,
        report.kept,
        report.expert_validation,
        report.untrained_validation,
        report.stage_s.iter().map(|(n, t)| format!("{n} {t:.0} s")).collect::<Vec<_>>().join(", "),
        a.output.display()
    );
    Ok(())
}

fn policy_net(p: &gpu::RlPolicy) -> &dqngpu_rl::net::PolicyNet {
    p.net()
}
