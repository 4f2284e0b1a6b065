//! `dqngpu deeprm train|eval`: DeepRM's own environment, to hold the learning code against
//! the paper's published numbers (HotNets'16, Fig. 5).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand};
use dqngpu_rl::checkpoint::{self, CheckpointMeta, Encoding, FORMAT_VERSION};
use dqngpu_rl::deeprm::{self, Baseline, DeepRmParams, Progress, Recipe, Scheduler, Trained};
use dqngpu_rl::net::OptimizerKind;
use dqngpu_rl::progress::{write_curve, TrainProgress};
use dqngpu_rl::reinforce::LrDecay;

use super::Format;

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
    #[arg(long, allow_negative_numbers = true, default_value_t = 130.0)]
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

/// `--preset`: the base settings the other flags override.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Preset {
    /// The paper's setting in 30 minutes here (docs/BENCHMARKS.md): 20,000 training sets, 4
    /// per iteration, lr 1e-3 -> 1e-4 (cosine) over a 1,740 s budget, the best of validation
    /// checks every 100 iterations on 200 sets kept.
    Paper,
    /// The earlier defaults, a short run: 100 sets, 10 per iteration, 1,000 iterations,
    /// constant lr, no time limit, final weights.
    Classic,
}

#[derive(ClapArgs, Debug)]
struct TrainArgs {
    #[command(flatten)]
    env: EnvArgs,
    /// Base settings; each flag below overrides its part.
    #[arg(long, value_enum, default_value_t = Preset::Paper)]
    preset: Preset,
    /// Training job sets (paper: 20000; classic: 100).
    #[arg(long)]
    jobsets: Option<usize>,
    /// Job sets per iteration, a window cycling over all of them (paper: 4; classic: 10).
    #[arg(long)]
    jobsets_per_iter: Option<usize>,
    /// Episodes per job set per iteration, the baseline's N (20).
    #[arg(long)]
    episodes: Option<usize>,
    /// Iterations (paper: 1000000, the time limit ends it; classic: 1000).
    #[arg(long)]
    iterations: Option<usize>,
    /// Learning rate at the start (1e-3).
    #[arg(long, allow_negative_numbers = true)]
    lr: Option<f64>,
    /// Learning rate at the end: it decays from --lr over training progress, the larger of
    /// iterations done / --iterations and elapsed / --time-limit-s (paper: 1e-4; classic:
    /// constant).
    #[arg(long, allow_negative_numbers = true)]
    lr_final: Option<f64>,
    /// Shape of the decay to --lr-final (cosine).
    #[arg(long, value_enum, ignore_case = true)]
    lr_decay: Option<LrDecay>,
    /// Optimiser (rmsprop, as DeepRM).
    #[arg(long, value_enum, ignore_case = true)]
    optimizer: Option<OptimizerKind>,
    /// Hidden layer sizes, comma-separated (20).
    #[arg(long, value_delimiter = ',')]
    hidden: Option<Vec<usize>>,
    /// Seed of the training job sets, the initial weights and the sampled actions (42).
    #[arg(long)]
    seed: Option<u64>,
    /// Stop after this many seconds of wall time (paper: 1740; classic: none); the checkpoint
    /// records the iterations done.
    #[arg(long, allow_negative_numbers = true)]
    time_limit_s: Option<f64>,
    /// Every this many iterations, a greedy evaluation on the validation job sets; the output
    /// gets the best-scoring weights seen, the final ones included (paper: 100; classic and
    /// 0: never, the final weights).
    #[arg(long)]
    eval_every: Option<usize>,
    /// Validation job sets, drawn from --val-seed, never the evaluation sets (paper: 200;
    /// classic: 100).
    #[arg(long)]
    val_jobsets: Option<usize>,
    /// Seed of the validation job sets (271828; must differ from --seed and from 314159).
    #[arg(long)]
    val_seed: Option<u64>,
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

impl TrainArgs {
    /// The preset with the flags given laid over it.
    fn recipe(&self) -> Recipe {
        let base = match self.preset {
            Preset::Paper => Recipe::paper(),
            Preset::Classic => Recipe::classic(),
        };
        Recipe {
            jobsets: self.jobsets.unwrap_or(base.jobsets),
            jobsets_per_iter: self.jobsets_per_iter.unwrap_or(base.jobsets_per_iter),
            episodes: self.episodes.unwrap_or(base.episodes),
            iterations: self.iterations.unwrap_or(base.iterations),
            lr: self.lr.unwrap_or(base.lr),
            lr_final: self.lr_final.or(base.lr_final),
            lr_decay: self.lr_decay.unwrap_or(base.lr_decay),
            optimizer: self.optimizer.unwrap_or(base.optimizer),
            hidden: self.hidden.clone().unwrap_or(base.hidden),
            seed: self.seed.unwrap_or(base.seed),
            time_limit_s: self.time_limit_s.or(base.time_limit_s),
            eval_every: self.eval_every.unwrap_or(base.eval_every),
            val_jobsets: self.val_jobsets.unwrap_or(base.val_jobsets),
            val_seed: self.val_seed.unwrap_or(base.val_seed),
        }
    }
}

#[derive(ClapArgs, Debug)]
struct EvalArgs {
    #[command(flatten)]
    env: EnvArgs,
    /// Evaluation job sets.
    #[arg(long, default_value_t = 100)]
    jobsets: usize,
    /// Seed of the evaluation job sets (must differ from the training seed).
    #[arg(long, default_value_t = deeprm::EVAL_SEED)]
    seed: u64,
    /// A trained DeepRM model to evaluate beside the baselines.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Weight of the packing score in Tetris*.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.01)]
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

fn train(a: TrainArgs) -> anyhow::Result<()> {
    // Before the half-hour of training: a run must not end in "cannot save".
    checkpoint::check_path(&a.output).with_context(|| format!("--output {}", a.output.display()))?;
    let params = a.env.params()?;
    let recipe = a.recipe();
    recipe.validate()?;
    let progress = TrainProgress::new(recipe.iterations, "slowdown", !a.quiet);
    let trained = deeprm::train_keep_best(&params, &recipe, &mut |p| match p {
        Progress::Iteration(s) => progress.update(s),
        Progress::Validated { stats: s, score } => progress.println(format!(
            "iteration {}: validation avg slowdown {score:.3} (training {:.3}, lr {:.2e}, {:.0} s)",
            s.iteration, s.mean_score, s.lr, s.elapsed_s
        )),
    })?;
    progress.finish();
    let Trained { net, curve, selection, stopped_at, wall_s } = trained;
    let chosen = selection
        .as_ref()
        .map(|b| {
            format!("; kept iteration {} (validation avg slowdown {:.3})", b.best_iteration, b.best_val_avg_slowdown)
        })
        .unwrap_or_default();
    let meta = CheckpointMeta {
        format: FORMAT_VERSION,
        agent: deeprm::AGENT.into(),
        encoding: Encoding::DeepRmClassic(params.clone()),
        hidden: recipe.hidden.clone(),
        train: recipe.train_config(),
        trained_on: format!("{} DeepRM job sets, seed {}, load {}%", recipe.jobsets, recipe.seed, a.env.load),
        iterations_done: curve.len(),
        train_wall_s: wall_s,
        schedule: Some(recipe.schedule()),
        selection,
        weights_fnv1a64: None,
    };
    checkpoint::save(&a.output, &net, &meta).with_context(|| format!("saving {}", a.output.display()))?;
    if let Some(path) = &a.curve {
        write_curve(path, &curve)?;
    }
    let last = curve.last().map(|s| s.mean_score).unwrap_or(f64::NAN);
    eprintln!(
        "trained {} iterations{} in {wall_s:.0} s; last training avg slowdown {last:.3}{chosen}; wrote {} and {}",
        curve.len(),
        stopped_at.map(|i| format!(" (time limit hit at {i})")).unwrap_or_default(),
        a.output.display(),
        checkpoint::meta_path(&a.output).display()
    );
    Ok(())
}

fn eval(a: EvalArgs) -> anyhow::Result<()> {
    let params = a.env.params()?;
    if !(1..=deeprm::MAX_JOBSETS).contains(&a.jobsets) {
        anyhow::bail!("--jobsets {}: expected 1 to {} evaluation job sets", a.jobsets, deeprm::MAX_JOBSETS);
    }
    if !a.tetris_knob.is_finite() {
        anyhow::bail!("--tetris-knob {}: expected a number", a.tetris_knob);
    }
    let sets = deeprm::job_sets(&params, a.seed, a.jobsets);
    let mut rows: Vec<(String, deeprm::EvalResult)> = Vec::new();
    if let Some(path) = &a.model {
        let (net, meta) = checkpoint::load(path, deeprm::AGENT, None)?;
        // Job sets of the training seed are the ones the model learnt on: no evaluation.
        if a.seed == meta.train.seed {
            anyhow::bail!(
                "--seed {}: {} was trained on the job sets of this seed (its `train.seed`); evaluate on another",
                a.seed,
                checkpoint::meta_path(path).display()
            );
        }
        // The load and the episode length shape the workload, not the network: a model trained
        // at one load may be evaluated at another; every other setting must match.
        let expected = match &meta.encoding {
            Encoding::DeepRmClassic(m) => DeepRmParams {
                new_job_rate: m.new_job_rate,
                simu_len: m.simu_len,
                episode_max_length: m.episode_max_length,
                ..params.clone()
            },
            _ => params.clone(),
        };
        checkpoint::require_encoding(&checkpoint::meta_path(path), &meta.encoding, &Encoding::DeepRmClassic(expected))?;
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        train: TrainArgs,
    }

    fn recipe(args: &[&str]) -> Recipe {
        let cli = Cli::try_parse_from(["deeprm-train"].iter().chain(args)).unwrap_or_else(|e| panic!("{e}"));
        cli.train.recipe()
    }

    /// Issue 13 item 6: no flags means the paper's recipe, not the short run.
    #[test]
    fn no_flags_train_by_the_paper_recipe() {
        assert_eq!(recipe(&["-o", "m"]), Recipe::paper());
        assert_eq!(recipe(&["--preset", "classic", "-o", "m"]), Recipe::classic());
    }

    #[test]
    fn flags_override_the_preset() {
        let r =
            recipe(&["-o", "m", "--jobsets", "7", "--optimizer", "ADAM", "--lr-decay", "linear", "--eval-every", "0"]);
        assert_eq!(
            r,
            Recipe {
                jobsets: 7,
                optimizer: OptimizerKind::Adam,
                lr_decay: LrDecay::Linear,
                eval_every: 0,
                ..Recipe::paper()
            }
        );
    }
}
