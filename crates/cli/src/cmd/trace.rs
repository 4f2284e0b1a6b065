//! `dqngpu trace replay|experiment`: Alibaba's GPU-sharing trace replayed as the FGD paper's
//! experiment (crate `dqngpu-trace`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand};
use dqngpu_trace::experiment::{list_name, paper, run_experiment, write_experiment, write_replay, ExperimentConfig};
use dqngpu_trace::learn::{train, IterationLog, LearnConfig};
use dqngpu_trace::policies::learned::{Learned, Weights};
use dqngpu_trace::policies::{by_name, for_list, paper_label};
use dqngpu_trace::reader;
use dqngpu_trace::timed::{summarize, write_timed};
use dqngpu_trace::{replay, replay_timed, ReplayConfig, TimedConfig, TimedResult};
use indicatif::{ProgressBar, ProgressStyle};

use super::Format;

/// Where the trace ships in the repository.
const DATA_DIR: &str = "data/alibaba-gpu-v2023/csv";

/// `path` as given when it is there (or absolute); else, for a relative path such as the
/// defaults, the same path in the source tree this binary was built from, when that holds it:
/// the shipped trace is found from any working directory.
fn shipped(path: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    if path.is_relative() && !path.exists() && repo.exists() {
        repo
    } else {
        path.to_path_buf()
    }
}

/// Reads a node or pod list with `read` from `path`, or from the shipped copy ([`shipped`]);
/// where neither is there, says where the trace ships.
fn read_list<T>(path: &Path, read: fn(&Path) -> Result<T, dqngpu_trace::TraceError>) -> anyhow::Result<T> {
    let p = shipped(path);
    anyhow::ensure!(
        p.exists(),
        "{} is not there: the trace ships in the repository's {DATA_DIR}; run from the repository root or pass --nodes and --pods",
        path.display()
    );
    Ok(read(&p)?)
}

fn read_nodes(path: &Path) -> anyhow::Result<Vec<dqngpu_trace::reader::NodeRow>> {
    read_list(path, reader::read_nodes)
}

fn read_pods(path: &Path) -> anyhow::Result<Vec<dqngpu_trace::reader::PodRow>> {
    read_list(path, reader::read_pods)
}

/// Arguments.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay one pod list under one policy and seed.
    Replay(ReplayArgs),
    /// Every policy x seeds 42..51 x pod lists, in parallel, with a report beside the published numbers (the FGD artifact's per-seed results).
    Experiment(ExperimentArgs),
    /// Train the learned `dqngpu` scorer (evolution strategies on training seeds from 1000).
    Train(TrainArgs),
    /// Time-aware replay of every policy: arrivals and departures in time order, a queue;
    /// queueing delay and allocation over time (docs/TRACE.md).
    Timed(TimedArgs),
}

/// `--load`: the peak GPU demand (1.0 = capacity), or `None` for the trace's own times. A
/// newtype, because clap reads a bare `Option<f64>` field as an optional `f64`.
#[derive(Debug, Clone, Copy)]
struct Load(Option<f64>);

/// `--reserve-after`: seconds, or `off`.
#[derive(Debug, Clone, Copy)]
struct ReserveAfter(Option<f64>);

fn parse_reserve_after(s: &str) -> Result<ReserveAfter, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(ReserveAfter(None));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(ReserveAfter(Some(v))),
        _ => Err(format!("`{s}` is neither `off` nor a number of seconds >= 0")),
    }
}

fn parse_load(s: &str) -> Result<Load, String> {
    if s.eq_ignore_ascii_case("trace") {
        return Ok(Load(None));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Load(Some(v))),
        _ => Err(format!("`{s}` is neither `trace` nor a positive number")),
    }
}

/// `trace timed` options.
#[derive(ClapArgs, Debug)]
struct TimedArgs {
    /// Node list CSV.
    #[arg(long, default_value = "data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv")]
    nodes: PathBuf,
    /// Pod list CSV with creation, deletion and scheduled times.
    #[arg(long, default_value = "data/alibaba-gpu-v2023/csv/openb_pod_list_default.csv")]
    pods: PathBuf,
    /// Policies, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    policies: String,
    /// Peak GPU demand the arrivals are compressed to (1.0 = the kept nodes' capacity), or
    /// `trace` for the trace's own times.
    #[arg(long, default_value = "1.0", value_parser = parse_load, allow_hyphen_values = true)]
    load: Load,
    /// Share of the nodes of each GPU model kept (drawn by the seed): the openb pods ask for
    /// about a tenth of the whole cluster at most.
    #[arg(long, allow_negative_numbers = true, default_value_t = dqngpu_trace::timed::DEFAULT_NODE_SHARE)]
    node_share: f64,
    /// Reserve a node for the oldest waiting pod once it has waited this many seconds, so
    /// that pods only an empty node holds cannot starve (docs/TRACE.md); `off`: kube-scheduler's
    /// queue.
    #[arg(long, default_value = "off", value_parser = parse_reserve_after, allow_negative_numbers = true)]
    reserve_after: ReserveAfter,
    /// First seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Number of seeds.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Worker threads (default: the available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory.
    #[arg(long, default_value = "results/trace-timed")]
    out: PathBuf,
}

/// `trace train` options.
#[derive(ClapArgs, Debug)]
struct TrainArgs {
    /// Node list CSV.
    #[arg(long, default_value = "data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv")]
    nodes: PathBuf,
    /// Pod list CSV.
    #[arg(long, default_value = "data/alibaba-gpu-v2023/csv/openb_pod_list_default.csv")]
    pods: PathBuf,
    /// Iterations.
    #[arg(long, default_value_t = LearnConfig::default().iterations)]
    iterations: usize,
    /// Antithetic pairs per iteration.
    #[arg(long, default_value_t = LearnConfig::default().pairs)]
    pairs: usize,
    /// Pod sequences per evaluation.
    #[arg(long, default_value_t = LearnConfig::default().sequences)]
    sequences: usize,
    /// Perturbation scale of the weights.
    #[arg(long, allow_negative_numbers = true, default_value_t = LearnConfig::default().sigma)]
    sigma: f64,
    /// Length of each step (along the normalised gradient estimate).
    #[arg(long, allow_negative_numbers = true, default_value_t = LearnConfig::default().step)]
    step: f64,
    /// Start from these weights (a weights file) instead of FGD's.
    #[arg(long)]
    init: Option<PathBuf>,
    /// Validation sequences (seeds from 2000): the trained weights are kept only when they
    /// beat the starting ones there; 0 skips the check.
    #[arg(long, default_value_t = LearnConfig::default().validation)]
    validation: usize,
    /// Seed of the perturbations.
    #[arg(long, default_value_t = LearnConfig::default().seed)]
    seed: u64,
    /// Where to write the weights (JSON).
    #[arg(short, long, default_value = "results/trace/dqngpu.json")]
    out: PathBuf,
}

/// `trace replay` options.
#[derive(ClapArgs, Debug)]
struct ReplayArgs {
    /// Node list CSV (`sn,cpu_milli,memory_mib,gpu,model`).
    #[arg(long, default_value = "data/alibaba-gpu-v2023/csv/openb_node_list_gpu_node.csv")]
    nodes: PathBuf,
    /// Pod list CSV (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`).
    #[arg(long, default_value = "data/alibaba-gpu-v2023/csv/openb_pod_list_default.csv")]
    pods: PathBuf,
    /// random, dotprod, gpuclustering, gpupacking, bestfit, fgd or dqngpu (learned).
    #[arg(long, default_value = "fgd")]
    policy: String,
    /// Weights for `--policy dqngpu` (default: the shipped ones).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Inflate the pods until they request this multiple of the GPU capacity (<= 0: as listed).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.3)]
    tune: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Also write the run's files into this directory: curves.csv, result.json and
    /// allocation.svg/png; with --timed summary.csv, curves.csv, results.json and
    /// allocation_over_time.svg/png (docs/TRACE.md).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replay in time: arrivals at their creation times, departures after their run times, a
    /// queue for pods that fit nowhere (--tune does not apply).
    #[arg(long)]
    timed: bool,
    /// With --timed: peak GPU demand the arrivals are compressed to (1.0 = capacity), or `trace`.
    #[arg(long, default_value = "1.0", value_parser = parse_load, allow_hyphen_values = true)]
    load: Load,
    /// With --timed: share of the nodes of each GPU model kept (drawn by the seed).
    #[arg(long, allow_negative_numbers = true, default_value_t = dqngpu_trace::timed::DEFAULT_NODE_SHARE)]
    node_share: f64,
    /// With --timed: reserve a node for the oldest waiting pod once it has waited this many
    /// seconds; `off`: kube-scheduler's queue.
    #[arg(long, default_value = "off", value_parser = parse_reserve_after, allow_negative_numbers = true)]
    reserve_after: ReserveAfter,
}

/// `trace experiment` options.
#[derive(ClapArgs, Debug)]
struct ExperimentArgs {
    /// Directory of the openb CSVs.
    #[arg(long, default_value = DATA_DIR)]
    data: PathBuf,
    /// Node list file name inside --data.
    #[arg(long, default_value = "openb_node_list_gpu_node.csv")]
    nodes: String,
    /// Pod lists by short name (`default`, `cpu050`, `gpushare40`...), comma-separated, or `all`
    /// (the default list and the cpu*, gpushare*, gpuspec* and multigpu* variants found in --data).
    #[arg(long, default_value = "all")]
    lists: String,
    /// Policies, comma-separated.
    #[arg(long, default_value = "random,dotprod,gpuclustering,gpupacking,bestfit,fgd")]
    policies: String,
    /// First seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Number of seeds.
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// Tune ratio.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.3)]
    tune: f64,
    /// Worker threads (default: the available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory.
    #[arg(long, default_value = "results/trace")]
    out: PathBuf,
}

/// Runs `trace`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Replay(a) => replay_cmd(a),
        Command::Experiment(a) => experiment_cmd(a),
        Command::Train(a) => train_cmd(a),
        Command::Timed(a) => timed_cmd(a),
    }
}

fn replay_cmd(a: ReplayArgs) -> anyhow::Result<()> {
    if !a.tune.is_finite() {
        anyhow::bail!("--tune must be a finite number, got {}", a.tune);
    }
    let policy = match (&a.model, a.policy.as_str()) {
        (Some(m), "dqngpu") => load_learned(m)?,
        (Some(_), other) => anyhow::bail!("--model applies to --policy dqngpu, not `{other}`"),
        (None, name) => for_list(name, &list_name(&a.pods))?,
    };
    let nodes = read_nodes(&a.nodes)?;
    let pods = read_pods(&a.pods)?;
    if a.timed {
        let cfg = TimedConfig {
            load: a.load.0,
            seed: a.seed,
            node_share: a.node_share,
            reserve_after_s: a.reserve_after.0,
            ..TimedConfig::default()
        };
        let r = replay_timed(&nodes, &pods, policy.as_ref(), &cfg)?;
        warn_never_fit(&r.never_fit);
        if let Some(dir) = &a.out {
            write_timed(std::slice::from_ref(&r), dir).with_context(|| format!("writing {}", dir.display()))?;
        }
        match a.format {
            Format::Json => println!("{}", serde_json::to_string_pretty(&r)?),
            Format::Table => print_timed(&list_name(&a.pods), std::slice::from_ref(&r)),
        }
        return Ok(());
    }
    let r = replay(&nodes, &pods, policy.as_ref(), &ReplayConfig { tune: a.tune, seed: a.seed })?;
    warn_never_fit(&r.never_fit);
    if let Some(dir) = &a.out {
        write_replay(&r, dir).with_context(|| format!("writing {}", dir.display()))?;
    }
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&r)?),
        Format::Table => {
            println!(
                "{} on {} ({} nodes, {} GPUs), seed {}, tune {}",
                paper_label(&r.policy),
                list_name(&a.pods),
                r.nodes,
                r.gpus,
                r.seed,
                r.tune
            );
            println!(
                "pods: {} original, {} tried, {} placed, {} failed; {:.2} s",
                r.pods_original, r.pods_tried, r.pods_placed, r.pods_failed, r.wall_s
            );
            let (p100, p130) = if dqngpu_trace::experiment::comparable_to_paper(&a.nodes, r.tune, &[r.seed]) {
                paper(&list_name(&a.pods), &r.policy)
            } else {
                (None, None)
            };
            println!("{:>8} {:>12} {:>14} {:>10}", "arrived", "allocated", "fragmented", "paper");
            for pct in [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130] {
                let p = match (pct, p100, p130) {
                    (100, Some(x), _) | (130, _, Some(x)) => format!("{x:.2}%"),
                    _ => String::new(),
                };
                let f = |v: Option<f64>| v.map(|x| format!("{x:.2}%")).unwrap_or_else(|| "-".into());
                println!("{:>7}% {:>12} {:>14} {:>10}", pct, f(r.allocation_pct[pct]), f(r.fragmentation_pct[pct]), p);
            }
        }
    }
    Ok(())
}

/// Names the pods no node could ever hold (counted failed, or never queued when timed).
fn warn_never_fit(never_fit: &[String]) {
    if never_fit.is_empty() {
        return;
    }
    let shown: Vec<&str> = never_fit.iter().take(20).map(String::as_str).collect();
    let more = if never_fit.len() > shown.len() { ", ..." } else { "" };
    tracing::warn!("{} pod(s) fit no node even when the cluster is empty: {}{more}", never_fit.len(), shown.join(", "));
    eprintln!(
        "warning: {} pod(s) can never fit any node and are never placed (counted failed when tried): {}{more}",
        never_fit.len(),
        shown.join(", ")
    );
}

/// The timed replays' table: one line per policy, means over seeds.
fn print_timed(list: &str, results: &[TimedResult]) {
    let Some(r0) = results.first() else { return };
    println!(
        "timed replay of {list} ({} pods) on {} nodes (--node-share {:.1}% asked, seed {}), {} GPUs: peak GPU demand {:.1}%, \
         {:.1}% on average (arrivals {:.1}x the trace's pace), arrival span {:.0} s",
        r0.pods,
        r0.nodes,
        100.0 * r0.node_share,
        r0.seed,
        r0.gpus,
        r0.peak_demand_pct,
        r0.offered_load_pct,
        r0.time_scale,
        r0.arrival_span_s
    );
    println!(
        "{:<14} {:>5} {:>11} {:>11} {:>11} {:>8} {:>10} {:>8} {:>7} {:>9}",
        "policy",
        "seeds",
        "wait_mean_s",
        "wait_p95_s",
        "wait_max_s",
        "waited%",
        "gpu_alloc%",
        "cpu_%",
        "peak_q",
        "reserved"
    );
    for m in summarize(results) {
        println!(
            "{:<14} {:>5} {:>11.1} {:>11.1} {:>11.1} {:>8.2} {:>10.2} {:>8.2} {:>7.0} {:>9.1}",
            paper_label(&m.policy),
            m.seeds,
            m.mean_wait_s,
            m.p95_wait_s,
            m.max_wait_s,
            m.waited_pct,
            m.mean_allocation_pct,
            m.mean_cpu_allocation_pct,
            m.peak_queue,
            m.reservations
        );
    }
}

/// The most seeds one run replays (`--seeds`), and the most worker threads (`--jobs`): far
/// past any use here, and bounds on what is allocated before the first replay.
const MAX_SEEDS: u64 = 10_000;
const MAX_WORKERS: usize = 1024;

/// Seeds `seed .. seed + seeds`, checked: 1 to [`MAX_SEEDS`] of them, none past `u64::MAX`.
fn seed_range(seed: u64, seeds: u64) -> anyhow::Result<std::ops::Range<u64>> {
    if !(1..=MAX_SEEDS).contains(&seeds) {
        anyhow::bail!("--seeds {seeds}: expected 1 to {MAX_SEEDS}");
    }
    let end = seed
        .checked_add(seeds)
        .ok_or_else(|| anyhow::anyhow!("--seed {seed} + --seeds {seeds} is past the largest seed"))?;
    Ok(seed..end)
}

/// The pool `--jobs` asks for (default: the available cores), at most [`MAX_WORKERS`] threads.
fn worker_pool(jobs: Option<usize>) -> anyhow::Result<rayon::ThreadPool> {
    if jobs.is_some_and(|j| j > MAX_WORKERS) {
        anyhow::bail!(
            "--jobs {}: expected at most {MAX_WORKERS} worker threads (0 or absent: the cores)",
            jobs.unwrap_or(0)
        );
    }
    Ok(rayon::ThreadPoolBuilder::new().num_threads(jobs.unwrap_or(0)).build()?)
}

fn timed_cmd(a: TimedArgs) -> anyhow::Result<()> {
    let names: Vec<String> = if a.policies == "all" {
        dqngpu_trace::policies::ALL_POLICY_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        a.policies.split(',').map(|s| s.trim().to_string()).collect()
    };
    // A policy named twice would be replayed twice and pooled: its rows would claim twice the
    // seeds (as `trace experiment` refuses too).
    if let Some(k) = (1..names.len()).find(|&k| names[..k].contains(&names[k])) {
        anyhow::bail!("--policies {}: expected each policy once; `{}` is named twice", a.policies, names[k]);
    }
    let list = list_name(&a.pods);
    let policies = names.iter().map(|n| for_list(n, &list)).collect::<Result<Vec<_>, _>>()?;
    let seeds = seed_range(a.seed, a.seeds)?;
    let pool = worker_pool(a.jobs)?;
    let nodes = read_nodes(&a.nodes)?;
    let pods = read_pods(&a.pods)?;
    let runs: Vec<(usize, u64)> = (0..policies.len()).flat_map(|p| seeds.clone().map(move |s| (p, s))).collect();
    let bar = ProgressBar::new(runs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("timed replays {bar:30} {pos}/{len} [{elapsed_precise} < {eta_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let results: Vec<TimedResult> = pool.install(|| {
        use rayon::prelude::*;
        runs.par_iter()
            .map(|&(p, seed)| {
                let cfg = TimedConfig {
                    load: a.load.0,
                    seed,
                    node_share: a.node_share,
                    reserve_after_s: a.reserve_after.0,
                    ..TimedConfig::default()
                };
                let r = replay_timed(&nodes, &pods, policies[p].as_ref(), &cfg);
                bar.inc(1);
                r
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    bar.finish_and_clear();
    if let Some(r) = results.first() {
        warn_never_fit(&r.never_fit);
    }
    write_timed(&results, &a.out).with_context(|| format!("writing {}", a.out.display()))?;
    print_timed(&list_name(&a.pods), &results);
    println!("results: {}", a.out.display());
    Ok(())
}

/// The pod lists `spec` names, found in `data`.
fn pod_lists(data: &Path, spec: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(data)
        .with_context(|| format!("reading {}", data.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("openb_pod_list_") && n.ends_with(".csv"))
        })
        .collect();
    found.sort();
    if spec == "all" {
        let wanted = ["default", "cpu", "gpushare", "gpuspec", "multigpu"];
        let mut out: Vec<PathBuf> = found.iter().filter(|p| list_name(p) == "default").cloned().collect();
        out.extend(
            found
                .iter()
                .filter(|p| {
                    let n = list_name(p);
                    n != "default" && wanted.iter().any(|w| n.starts_with(w))
                })
                .cloned(),
        );
        return Ok(out);
    }
    spec.split(',')
        .map(|name| {
            found.iter().find(|p| list_name(p) == name.trim()).cloned().ok_or_else(|| {
                anyhow::Error::new(dqngpu_model::ModelError::UnknownName {
                    what: "pod list",
                    name: name.to_string(),
                    valid: found.iter().map(|p| list_name(p)).collect(),
                })
            })
        })
        .collect()
}

fn experiment_cmd(a: ExperimentArgs) -> anyhow::Result<()> {
    let policies: Vec<String> = a.policies.split(',').map(|s| s.trim().to_string()).collect();
    for p in &policies {
        by_name(p)?;
    }
    let seeds = seed_range(a.seed, a.seeds)?;
    let pool = worker_pool(a.jobs)?;
    let cfg = ExperimentConfig {
        nodes: shipped(&a.data).join(&a.nodes),
        pod_lists: pod_lists(&shipped(&a.data), &a.lists)?,
        policies,
        seeds: seeds.collect(),
        tune: a.tune,
    };
    let total = cfg.pod_lists.len() * cfg.policies.len() * cfg.seeds.len();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("replays {bar:30} {pos}/{len} [{elapsed_precise} < {eta_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let tick = || bar.inc(1);
    let res = pool.install(|| run_experiment(&cfg, &tick))?;
    bar.finish_and_clear();
    let report = write_experiment(&res, &a.out)?;
    println!("{:<12} {:<14} {:>9} {:>9} {:>9} {:>9}", "list", "policy", "@100%", "paper", "@130%", "paper");
    for s in &res.summary {
        let f = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
        println!(
            "{:<12} {:<14} {:>9} {:>9} {:>9} {:>9}",
            s.list,
            paper_label(&s.policy),
            f(s.alloc_100),
            f(s.paper.0),
            f(s.alloc_130),
            f(s.paper.1)
        );
    }
    println!("report: {}", report.display());
    Ok(())
}

fn read_weights(path: &Path) -> anyhow::Result<Weights> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let weights: Weights =
        serde_json::from_str(&text).with_context(|| format!("{}: not a weights file", path.display()))?;
    Weights::check(&weights.w).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(weights)
}

fn load_learned(path: &Path) -> anyhow::Result<Box<dyn dqngpu_trace::NodePolicy>> {
    Ok(Box::new(Learned { weights: read_weights(path)? }))
}

/// Refuses settings that would train on nothing or on no numbers, naming the flag, before any
/// work (`--sigma nan` trained and wrote "sigma NaN"; `--sequences 0` wrote weights learned
/// from no pod).
fn check_train(a: &TrainArgs) -> anyhow::Result<()> {
    if a.pairs == 0 || a.sequences == 0 || a.iterations == 0 {
        anyhow::bail!(
            "--iterations, --pairs and --sequences must each be at least 1 (got {}, {}, {})",
            a.iterations,
            a.pairs,
            a.sequences
        );
    }
    if !(a.sigma.is_finite() && a.sigma > 0.0) {
        anyhow::bail!("--sigma: the perturbation scale must be a number > 0, got {}", a.sigma);
    }
    if !(a.step.is_finite() && a.step > 0.0) {
        anyhow::bail!("--step: the step length must be a number > 0, got {}", a.step);
    }
    Ok(())
}

fn train_cmd(a: TrainArgs) -> anyhow::Result<()> {
    check_train(&a)?;
    let nodes = read_nodes(&a.nodes)?;
    let pods = read_pods(&a.pods)?;
    // Pods no node can hold teach nothing; a list of only such pods would train on nothing.
    let never = dqngpu_trace::replay::never_fit(&nodes, &pods)?;
    anyhow::ensure!(
        never.len() < pods.len(),
        "no pod of {} fits any node of {}: there is nothing to learn from",
        a.pods.display(),
        a.nodes.display()
    );
    warn_never_fit(&never);
    let init = match &a.init {
        Some(p) => Some(read_weights(p)?.w),
        None => None,
    };
    let cfg = LearnConfig {
        iterations: a.iterations,
        pairs: a.pairs,
        sequences: a.sequences,
        sigma: a.sigma,
        step: a.step,
        seed: a.seed,
        init,
        validation: a.validation,
        ..LearnConfig::default()
    };
    let bar = ProgressBar::new(cfg.iterations as u64);
    bar.set_style(
        ProgressStyle::with_template("train {bar:30} {pos}/{len} [{elapsed_precise} < {eta_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let log = |l: &IterationLog| {
        bar.set_message(format!("reward {:.3}", l.mean_reward));
        bar.inc(1);
    };
    let (mut weights, logs) = train(&nodes, &pods, &cfg, &log)?;
    weights.provenance = format!("pod list `{}`: {}", list_name(&a.pods), weights.provenance);
    bar.finish_and_clear();
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    dqngpu_model::error::write_file_atomic(&a.out, serde_json::to_string_pretty(&weights)?.as_bytes())?;
    for l in &logs {
        println!("iteration {:>3}: mean reward {:.3}, best {:.3}", l.iteration, l.mean_reward, l.best_reward);
    }
    println!("weights: {:?}\nwritten to {}", weights.w, a.out.display());
    Ok(())
}
