//! `dqngpu deeprm train|eval`: DeepRM's own environment, to hold the learning code against
//! the paper's published numbers (HotNets'16, Fig. 5).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand};
use dqngpu_rl::checkpoint::{self, CheckpointMeta, Encoding, FORMAT_VERSION};
use dqngpu_rl::deeprm::{self, Baseline, DeepRmParams, Scheduler};
use dqngpu_rl::net::{OptimizerKind, PolicyNet};
use dqngpu_rl::progress::{write_curve, TrainProgress};
use dqngpu_rl::reinforce::{LrDecay, Schedule, TrainConfig};

use super::Format;

/// Seed of the training job sets unless `--seed` says otherwise.
const TRAIN_SEED: u64 = 42;
/// Seed of the evaluation job sets (DeepRM's `unseen` seed); distinct from any training seed.
const EVAL_SEED: u64 = 314_159;
/// Seed of the validation job sets that pick the best weights during training; distinct from
/// both, so the evaluation sets are never looked at while training.
const VAL_SEED: u64 = 271_828;
/// Validation episodes stop at this time step (jobs not started count as finishing there):
/// ten times the arrival window, far beyond what any useful policy needs.
fn val_max_time(p: &DeepRmParams) -> usize {
    p.simu_len.saturating_mul(10).max(500)
}

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
    /// Learning rate (at the start, with --lr-final).
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Learning rate at the end: it decays from --lr over training progress, the larger of
    /// iterations done / --iterations and elapsed / --time-limit-s (default: constant).
    #[arg(long)]
    lr_final: Option<f64>,
    /// Shape of the decay to --lr-final: cosine or linear.
    #[arg(long, default_value = "cosine")]
    lr_decay: String,
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
    /// Every this many iterations, a greedy evaluation on the validation job sets; the output
    /// gets the best-scoring weights seen, the final ones included (0: never; the output
    /// gets the final weights).
    #[arg(long, default_value_t = 0)]
    eval_every: usize,
    /// Validation job sets (drawn from --val-seed; never the evaluation sets).
    #[arg(long, default_value_t = 100)]
    val_jobsets: usize,
    /// Seed of the validation job sets (must differ from --seed and from 314159).
    #[arg(long, default_value_t = VAL_SEED)]
    val_seed: u64,
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

fn lr_decay(name: &str) -> anyhow::Result<LrDecay> {
    match name {
        "cosine" => Ok(LrDecay::Cosine),
        "linear" => Ok(LrDecay::Linear),
        other => Err(dqngpu_model::ModelError::UnknownName {
            what: "lr decay",
            name: other.into(),
            valid: vec!["cosine".into(), "linear".into()],
        }
        .into()),
    }
}

/// The best weights seen on the validation sets.
struct Best {
    iteration: usize,
    score: f64,
    net: PolicyNet,
}

fn train(a: TrainArgs) -> anyhow::Result<()> {
    let params = a.env.params()?;
    if a.seed == EVAL_SEED {
        anyhow::bail!("--seed {EVAL_SEED} draws the evaluation job sets; pick another training seed");
    }
    let validate = a.eval_every > 0;
    if validate {
        if a.val_jobsets == 0 {
            anyhow::bail!("--eval-every {} needs --val-jobsets of at least 1", a.eval_every);
        }
        if a.val_seed == EVAL_SEED || a.val_seed == a.seed {
            anyhow::bail!(
                "--val-seed {} must differ from the training seed ({}) and the evaluation seed ({EVAL_SEED})",
                a.val_seed,
                a.seed
            );
        }
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
        // DeepRM's environment has its own reward (slowdown); the field is unused there.
        objective: dqngpu_rl::reinforce::Objective::default(),
    };
    let schedule = Schedule { lr_final: a.lr_final, decay: lr_decay(&a.lr_decay)?, time_limit_s: a.time_limit_s };
    schedule.validate()?;
    let sets = deeprm::job_sets(&params, a.seed, a.jobsets);
    let val_sets = if validate { deeprm::job_sets(&params, a.val_seed, a.val_jobsets) } else { Vec::new() };
    let progress = TrainProgress::new(a.iterations, "slowdown", !a.quiet);
    let started = std::time::Instant::now();
    let limit = a.time_limit_s;
    let mut stop_at = None;
    let mut best: Option<Best> = None;
    let mut evaluations: Vec<(usize, f64)> = Vec::new();
    let mut failure: Option<anyhow::Error> = None;
    // Scores `net` on the validation sets and keeps a copy when it is the best so far.
    let mut check = |iteration: usize, net: &PolicyNet| -> anyhow::Result<f64> {
        let v = deeprm::validate(&params, &val_sets, net, val_max_time(&params))?;
        evaluations.push((iteration, v));
        if best.as_ref().is_none_or(|b| v < b.score) {
            best = Some(Best { iteration, score: v, net: net.snapshot()? });
        }
        Ok(v)
    };
    let (net, curve) = deeprm::train_until(&params, sets, &cfg, &schedule, &mut |s, net| {
        progress.update(s);
        if validate && s.iteration % a.eval_every == 0 {
            match check(s.iteration, net) {
                Ok(v) => progress.println(format!(
                    "iteration {}: validation avg slowdown {v:.3} (training {:.3}, lr {:.2e}, {:.0} s)",
                    s.iteration, s.mean_score, s.lr, s.elapsed_s
                )),
                Err(e) => {
                    failure = Some(e.context(format!("validation at iteration {}", s.iteration)));
                    return false;
                }
            }
        }
        let over = limit.is_some_and(|l| started.elapsed().as_secs_f64() >= l);
        if over {
            stop_at = Some(s.iteration);
        }
        !over
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    progress.finish();
    let wall = started.elapsed().as_secs_f64();
    if validate && !curve.len().is_multiple_of(a.eval_every) {
        // The final weights compete too.
        check(curve.len(), &net)?;
    }
    let (out_net, selection) = match &best {
        Some(b) => (
            &b.net,
            serde_json::json!({
                "rule": "lowest greedy avg slowdown on the validation job sets",
                "val_seed": a.val_seed,
                "val_jobsets": a.val_jobsets,
                "val_max_time": val_max_time(&params),
                "eval_every": a.eval_every,
                "best_iteration": b.iteration,
                "best_val_avg_slowdown": b.score,
                "evaluations": evaluations,
            }),
        ),
        None => (&net, serde_json::json!({"rule": "final weights"})),
    };
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
    checkpoint::save(&a.output, out_net, &meta).with_context(|| format!("saving {}", a.output.display()))?;
    // The schedule and the selection go beside the standard fields (readers ignore them).
    let meta_file = checkpoint::meta_path(&a.output);
    let mut doc = serde_json::to_value(&meta)?;
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("schedule".into(), serde_json::to_value(schedule)?);
        obj.insert("selection".into(), selection);
    }
    dqngpu_model::error::write_file_atomic(&meta_file, serde_json::to_string_pretty(&doc)?.as_bytes())
        .with_context(|| format!("writing {}", meta_file.display()))?;
    if let Some(path) = &a.curve {
        write_curve(path, &curve)?;
    }
    let last = curve.last().map(|s| s.mean_score).unwrap_or(f64::NAN);
    let chosen = best
        .map(|b| format!("; kept iteration {} (validation avg slowdown {:.3})", b.iteration, b.score))
        .unwrap_or_default();
    eprintln!(
        "trained {} iterations{} in {wall:.0} s; last training avg slowdown {last:.3}{chosen}; wrote {} and {}",
        curve.len(),
        stop_at.map(|i| format!(" (time limit hit at {i})")).unwrap_or_default(),
        a.output.display(),
        meta_file.display()
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
