//! `dqngpu deeprm train|eval`: DeepRM's own environment, to hold the learning code against
//! the paper's published numbers (HotNets'16, Fig. 5).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand};
use dqngpu_rl::checkpoint::{self, CheckpointMeta, Encoding, FORMAT_VERSION};
use dqngpu_rl::deeprm::{self, Baseline, DeepRmParams, Scheduler};
use dqngpu_rl::net::OptimizerKind;
use dqngpu_rl::progress::{write_curve, TrainProgress};
use dqngpu_rl::reinforce::TrainConfig;

use super::Format;

/// Seed of the training job sets unless `--seed` says otherwise.
const TRAIN_SEED: u64 = 42;
/// Seed of the evaluation job sets (DeepRM's `unseen` seed); distinct from any training seed.
const EVAL_SEED: u64 = 314_159;

/// Arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train DeepRM's policy network with REINFORCE.
    Train(TrainArgs),
    /// Average slowdown of each scheduler over job sets that training never saw.
    Eval(EvalArgs),
}

/// Options shared by train and eval.
#[derive(ClapArgs, Debug)]
struct EnvArgs {
    /// Cluster load, percent (arrival rate = load / 185%).
    #[arg(long, default_value_t = 130.0)]
    load: f64,
    /// Visible job slots M (the paper's runs: 10).
    #[arg(long, default_value_t = 10)]
    slots: usize,
    /// Time steps with arrivals per job set.
    #[arg(long, default_value_t = 50)]
    simu_len: usize,
}

impl EnvArgs {
    fn params(&self) -> anyhow::Result<DeepRmParams> {
        if !(self.load.is_finite() && self.load > 0.0 && self.load <= 185.0) {
            anyhow::bail!("--load must be within (0, 185] percent (arrival probability at most 1), got {}", self.load);
        }
        let p = DeepRmParams { num_nw: self.slots, simu_len: self.simu_len, ..DeepRmParams::at_load(self.load) };
        p.validate()?;
        Ok(p)
    }
}

#[derive(ClapArgs, Debug)]
struct TrainArgs {
    #[command(flatten)]
    env: EnvArgs,
    /// Training job sets.
    #[arg(long, default_value_t = 100)]
    jobsets: usize,
    /// Job sets per iteration (a window cycling over all of them).
    #[arg(long, default_value_t = 10)]
    jobsets_per_iter: usize,
    /// Episodes per job set per iteration (the baseline's N).
    #[arg(long, default_value_t = 20)]
    episodes: usize,
    /// Iterations.
    #[arg(long, default_value_t = 1000)]
    iterations: usize,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Optimiser: rmsprop (DeepRM) or adam.
    #[arg(long, default_value = "rmsprop")]
    optimizer: String,
    /// Hidden layer sizes, comma-separated.
    #[arg(long, default_value = "20", value_delimiter = ',')]
    hidden: Vec<usize>,
    /// Seed of the training job sets, the initial weights and the sampled actions.
    #[arg(long, default_value_t = TRAIN_SEED)]
    seed: u64,
    /// Stop after this many seconds of wall time (the checkpoint records the iterations done).
    #[arg(long)]
    time_limit_s: Option<f64>,
    /// Evaluate on this many unseen job sets every `--eval-every` iterations (0: never).
    #[arg(long, default_value_t = 0)]
    eval_every: usize,
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

#[derive(ClapArgs, Debug)]
struct EvalArgs {
    #[command(flatten)]
    env: EnvArgs,
    /// Evaluation job sets.
    #[arg(long, default_value_t = 100)]
    jobsets: usize,
    /// Seed of the evaluation job sets (must differ from the training seed).
    #[arg(long, default_value_t = EVAL_SEED)]
    seed: u64,
    /// A trained DeepRM model to evaluate beside the baselines.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Weight of the packing score in Tetris*.
    #[arg(long, default_value_t = 0.01)]
    tetris_knob: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Train(a) => train(a),
        Command::Eval(a) => eval(a),
    }
}

fn optimizer(name: &str) -> anyhow::Result<OptimizerKind> {
    match name {
        "rmsprop" => Ok(OptimizerKind::Rmsprop),
        "adam" => Ok(OptimizerKind::Adam),
        other => Err(dqngpu_model::ModelError::UnknownName {
            what: "optimizer",
            name: other.into(),
            valid: vec!["rmsprop".into(), "adam".into()],
        }
        .into()),
    }
}

fn train(a: TrainArgs) -> anyhow::Result<()> {
    let params = a.env.params()?;
    if a.seed == EVAL_SEED {
        anyhow::bail!("--seed {EVAL_SEED} draws the evaluation job sets; pick another training seed");
    }
    let cfg = TrainConfig {
        iterations: a.iterations,
        episodes: a.episodes,
        jobsets_per_iter: a.jobsets_per_iter,
        lr: a.lr,
        optimizer: optimizer(&a.optimizer)?,
        gamma: 1.0,
        hidden: a.hidden.clone(),
        max_steps: 2000,
        seed: a.seed,
    };
    let sets = deeprm::job_sets(&params, a.seed, a.jobsets);
    let eval_sets = deeprm::job_sets(&params, EVAL_SEED, 100);
    let progress = TrainProgress::new(a.iterations, "slowdown", !a.quiet);
    let started = std::time::Instant::now();
    let limit = a.time_limit_s;
    let mut stop_at = None;
    let (net, curve) = deeprm::train_until(&params, sets, &cfg, &mut |s, net| {
        progress.update(s);
        if a.eval_every > 0 && s.iteration % a.eval_every == 0 {
            if let Ok(r) = deeprm::evaluate(&params, &eval_sets, Scheduler::Net(net), 0) {
                progress.println(format!("iteration {}: unseen avg slowdown {:.3}", s.iteration, r.avg_slowdown));
            }
        }
        let over = limit.is_some_and(|l| started.elapsed().as_secs_f64() >= l);
        if over {
            stop_at = Some(s.iteration);
        }
        !over
    })?;
    progress.finish();
    let wall = started.elapsed().as_secs_f64();
    let meta = CheckpointMeta {
        format: FORMAT_VERSION,
        agent: deeprm::AGENT.into(),
        encoding: Encoding::DeepRmClassic(params.clone()),
        hidden: cfg.hidden.clone(),
        train: cfg,
        trained_on: format!("{} DeepRM job sets, seed {}, load {}%", a.jobsets, a.seed, a.env.load),
        iterations_done: curve.len(),
        train_wall_s: wall,
    };
    checkpoint::save(&a.output, &net, &meta).with_context(|| format!("saving {}", a.output.display()))?;
    if let Some(path) = &a.curve {
        write_curve(path, &curve)?;
    }
    let last = curve.last().map(|s| s.mean_score).unwrap_or(f64::NAN);
    eprintln!(
        "trained {} iterations{} in {wall:.0} s; last training avg slowdown {last:.3}; wrote {} and {}",
        curve.len(),
        stop_at.map(|i| format!(" (time limit hit at {i})")).unwrap_or_default(),
        a.output.display(),
        checkpoint::meta_path(&a.output).display()
    );
    Ok(())
}

fn eval(a: EvalArgs) -> anyhow::Result<()> {
    let params = a.env.params()?;
    let sets = deeprm::job_sets(&params, a.seed, a.jobsets);
    let mut rows: Vec<(String, deeprm::EvalResult)> = Vec::new();
    if let Some(path) = &a.model {
        let (net, _) = checkpoint::load(path, deeprm::AGENT, Some(&Encoding::DeepRmClassic(params.clone())))?;
        rows.push(("deeprm".into(), deeprm::evaluate(&params, &sets, Scheduler::Net(&net), a.seed)?));
    }
    for b in [Baseline::TetrisStar { knob: a.tetris_knob }, Baseline::Sjf, Baseline::Packer, Baseline::Random] {
        rows.push((b.name().into(), deeprm::evaluate(&params, &sets, Scheduler::Baseline(b), a.seed)?));
    }
    match a.format {
        Format::Json => {
            let schedulers: serde_json::Map<String, serde_json::Value> = rows
                .iter()
                .map(|(n, r)| {
                    (n.clone(), serde_json::json!({"avg_slowdown": r.avg_slowdown, "avg_completion_time": r.avg_completion_time}))
                })
                .collect();
            let out = serde_json::json!({"load_pct": a.env.load, "jobsets": a.jobsets, "seed": a.seed, "schedulers": schedulers});
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Format::Table => {
            println!("DeepRM environment, load {}%, {} unseen job sets (seed {})", a.env.load, a.jobsets, a.seed);
            println!("{:<12} {:>13} {:>20}", "scheduler", "avg_slowdown", "avg_completion_time");
            for (n, r) in &rows {
                println!("{n:<12} {:>13.3} {:>20.3}", r.avg_slowdown, r.avg_completion_time);
            }
        }
    }
    Ok(())
}
