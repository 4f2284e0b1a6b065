//! `dqngpu train`: train DqnGPU or DeepRM Max / Mean on the simulator over the thesis library.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args as ClapArgs;
use dqngpu_model::{ClusterSpec, WorkloadClass};
use dqngpu_rl::checkpoint::{self, CheckpointMeta, Encoding, FORMAT_VERSION};
use dqngpu_rl::gpu::{self, AgentKind, GpuEncoding};
use dqngpu_rl::net::OptimizerKind;
use dqngpu_rl::progress::{write_curve, TrainProgress};
use dqngpu_rl::reinforce::{Objective, TrainConfig};

/// Arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Agent: dqngpu, deeprm-max or deeprm-mean (any case).
    #[arg(long, default_value = "dqngpu")]
    agent: AgentKind,
    /// Workload class of the training job sets (gpu_heavy, gpu_light, mem_heavy, mem_light,
    /// random), or `all` to cycle through the five.
    #[arg(long, default_value = "all")]
    workload: String,
    /// App library: `thesis`, `lucid` or a directory of profiles.
    #[arg(long, default_value = "thesis")]
    library: String,
    /// Cluster, e.g. `titanxp:1` or `4xtitanxp:2`.
    #[arg(long, default_value = "titanxp:1")]
    gpus: String,
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
    /// Training job sets (30 jobs each, drawn with seeds SEED*1000 + i).
    #[arg(long, default_value_t = 10)]
    jobsets: usize,
    /// Job sets per iteration.
    #[arg(long, default_value_t = 2)]
    jobsets_per_iter: usize,
    /// Episodes per job set per iteration (the baseline's N).
    #[arg(long, default_value_t = 8)]
    episodes: usize,
    /// Learning rate.
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Optimiser.
    #[arg(long, value_enum, ignore_case = true, default_value_t = OptimizerKind::Adam)]
    optimizer: OptimizerKind,
    /// Hidden layer sizes, comma-separated.
    #[arg(long, default_value = "20", value_delimiter = ',')]
    hidden: Vec<usize>,
    /// Waiting-job slots M.
    #[arg(long, default_value_t = 5)]
    slots: usize,
    /// Image rows T.
    #[arg(long, default_value_t = 20)]
    horizon: usize,
    /// Seconds of profile time per image row.
    #[arg(long, default_value_t = 15.0)]
    row_s: f64,
    /// Cells per resource in the images.
    #[arg(long, default_value_t = 10)]
    res_slots: usize,
    /// Slowdown guard: mask out groups predicted (contention model) to slow any job on the GPU
    /// by more than this many percent, or `off` (the thesis's agent). Default: 2 for dqngpu,
    /// off for deeprm-max / deeprm-mean.
    #[arg(long, value_name = "PCT|off")]
    max_slowdown: Option<String>,
    /// Seed of the training job sets, the initial weights and the sampled actions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds of wall time.
    #[arg(long)]
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

/// Runs the command.
pub fn run(a: Args) -> anyhow::Result<()> {
    // Before training: a run must not end in "cannot save".
    checkpoint::check_path(&a.output).with_context(|| format!("--output {}", a.output.display()))?;
    let agent = a.agent;
    let classes: Vec<WorkloadClass> =
        if a.workload == "all" { WorkloadClass::ALL.to_vec() } else { vec![a.workload.parse::<WorkloadClass>()?] };
    let optimizer = a.optimizer;
    let objective = Objective::from_name(&a.objective).ok_or_else(|| dqngpu_model::ModelError::UnknownName {
        what: "objective",
        name: a.objective.clone(),
        valid: Objective::NAMES.iter().map(|s| s.to_string()).collect(),
    })?;

    let library = dqngpu_model::library::resolve(&a.library)?;
    let cluster = ClusterSpec::parse_gpus(&a.gpus)?;
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
        lr: a.lr,
        optimizer,
        gamma: 1.0,
        hidden: a.hidden.clone(),
        max_steps: 5000,
        seed: a.seed,
        objective,
    };
    let sets = gpu::training_sets(&library, &classes, a.jobsets, a.seed)?;
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
            a.library,
            class_names.join("+"),
            a.gpus,
            a.interference,
            a.jobsets,
            gpu::JOBS_PER_SET,
            gpu::train_set_seed(a.seed, 0),
            gpu::train_set_seed(a.seed, a.jobsets.saturating_sub(1)),
        ),
        iterations_done: curve.len(),
        train_wall_s: wall,
        schedule: None,
        selection: None,
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

fn policy_net(p: &gpu::RlPolicy) -> &dqngpu_rl::net::PolicyNet {
    p.net()
}
