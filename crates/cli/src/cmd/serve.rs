//! `dqngpu serve`: the placement service. Flags are validated into typed configs before
//! anything starts; the service itself lives in the dqngpu-service crate.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use dqngpu_model::{ClusterSpec, GpuSlot, Policy};
use dqngpu_service::{HttpConfig, ServiceConfig, Supervisor};

/// Arguments.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    /// TOML file with any of the flags below (as `listen = "..."`, `data_dir = "..."`, ...);
    /// flags given on the command line win.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on; anything but loopback needs --token-file [default: 127.0.0.1:7070].
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Database and job files [default: ./dqngpu-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Virtual GPUs when no NVIDIA driver is present, e.g. `titanxp:2` (one node).
    #[arg(long)]
    gpus: Option<String>,
    /// Placement policy: a heuristic (fifo, sjf, tetris, bestfit, sjf-bestfit, lucid, greedy,
    /// random) or an RL agent (dqngpu, dqngpu-plan, deeprm-max, deeprm-mean) with --model
    /// [default: tetris].
    #[arg(long)]
    scheduler: Option<String>,
    /// Checkpoint of a trained RL agent.
    #[arg(long)]
    model: Option<PathBuf>,
    /// File holding the bearer token clients must send.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Profile libraries by app name: `thesis`, `lucid` or a directory; repeatable [default: thesis].
    #[arg(long)]
    library: Vec<String>,
    /// Seed for policies that draw random numbers [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Placement loop period, ms [default: 1000].
    #[arg(long)]
    tick_ms: Option<u64>,
    /// Failures a job may have before it is failed [default: 2].
    #[arg(long)]
    max_retries: Option<u32>,
    /// Set CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for every job (when MPS runs).
    #[arg(long)]
    mps_thread_pct: Option<u8>,
    /// Slowdown budget for every policy, percent, or `off` [default: off]: a group predicted
    /// (by the --interference model) to slow a job on its GPU past it is not started, as `simulate
    /// --max-slowdown` does; the DqnGPU scorer chooses within it.
    #[arg(long, allow_negative_numbers = true, value_name = "PCT|off")]
    max_slowdown: Option<String>,
    /// Interference model the slowdown budget and the DqnGPU scorer's memory fit predict with:
    /// contention, contention-h100 (fitted on an H100, time-sliced), measured or none
    /// [default: contention].
    #[arg(long)]
    interference: Option<String>,
    /// Per-request time limit, seconds, at most 86400 (a day) [default: 10].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_REQUEST_TIMEOUT_S))]
    request_timeout_s: Option<u64>,
    /// dqngpu-plan's search settings.
    #[command(flatten)]
    plan: super::PlanArgs,
    #[command(subcommand)]
    shim: Option<ShimCommand>,
}

/// Internal: the job supervisor the service starts for each attempt.
#[derive(clap::Subcommand, Debug)]
enum ShimCommand {
    /// Runs one job attempt and records its exit status (started by the service).
    #[command(hide = true, name = "job-shim")]
    JobShim {
        /// The attempt's directory.
        #[arg(long)]
        dir: PathBuf,
        /// The job's argv.
        #[arg(last = true, required = true)]
        argv: Vec<OsString>,
    },
}

/// The longest `--request-timeout-s`: a day (hyper panics on a header timeout that overflows
/// an `Instant`, and no request needs longer).
const MAX_REQUEST_TIMEOUT_S: u64 = 86_400;

/// The `--config` file: the same settings as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    gpus: Option<String>,
    scheduler: Option<String>,
    model: Option<PathBuf>,
    token_file: Option<PathBuf>,
    #[serde(default)]
    library: OneOrMany,
    seed: Option<u64>,
    tick_ms: Option<u64>,
    max_retries: Option<u32>,
    mps_thread_pct: Option<u8>,
    max_slowdown: Option<NumberOrText>,
    interference: Option<String>,
    request_timeout_s: Option<u64>,
    plan_rows: Option<usize>,
    plan_guard: Option<f64>,
}

/// A library, or a list of them (`library = "thesis"` or `library = ["thesis", "dir"]`).
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::None => Vec::new(),
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// A budget as a number (`10`) or as the flag takes it (`"10"`, `"off"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(f64),
    Text(String),
}

impl NumberOrText {
    fn into_text(self) -> String {
        match self {
            NumberOrText::Number(n) => n.to_string(),
            NumberOrText::Text(t) => t,
        }
    }
}

/// A path from the config file at `config` (`None`: a flag), relative to the file's folder
/// when it is relative, as a user reading the file expects; a flag's stays as given.
fn from_file(config: Option<&Path>, p: PathBuf) -> PathBuf {
    match config.and_then(Path::parent) {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p,
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(ShimCommand::JobShim { dir, argv }) = &args.shim {
        let code = dqngpu_service::exec::run_shim(dir, argv)?;
        std::process::exit(code);
    }
    let file = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str::<FileConfig>(&text).with_context(|| format!("{}: invalid service config", p.display()))?
        }
        None => FileConfig::default(),
    };
    let cfg_path = args.config.as_deref();
    let in_file = |p: Option<PathBuf>| p.map(|p| from_file(cfg_path, p));
    let data_dir =
        args.data_dir.or(in_file(file.data_dir)).unwrap_or_else(|| PathBuf::from(dqngpu_service::DEFAULT_DATA_DIR));
    // Flags win: a scheduler given as a flag takes the file's model only if it is an agent.
    let flag_heuristic = args
        .scheduler
        .as_deref()
        .and_then(|n| n.parse::<dqngpu_rl::SchedulerName>().ok())
        .is_some_and(|n| !n.is_agent());
    let scheduler = args.scheduler.or(file.scheduler).unwrap_or_else(|| dqngpu_service::DEFAULT_SCHEDULER.into());
    let model = args.model.or(if flag_heuristic { None } else { in_file(file.model) });
    let seed = args.seed.or(file.seed).unwrap_or(0);
    let token = match args.token_file.or(in_file(file.token_file)) {
        Some(p) => Some(read_token(&p)?),
        None => None,
    };
    let file_libraries = file.library.into_vec();
    let libraries = if !args.library.is_empty() {
        args.library
    } else if !file_libraries.is_empty() {
        // A directory named relative to the file is found beside it.
        let dir = cfg_path.and_then(Path::parent).unwrap_or(Path::new(""));
        file_libraries.iter().map(|l| dqngpu_model::library::named_in(dir, l)).collect()
    } else {
        vec!["thesis".into()]
    };
    let libraries = libraries
        .iter()
        .map(|l| dqngpu_model::library::resolve(l).with_context(|| format!("--library {l}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Where a setting came from, for its errors: the flag, or the file's field.
    let origin = |flag: &str, field: &str, by_flag: bool| match cfg_path {
        Some(p) if !by_flag => format!("{}, field `{field}`", p.display()),
        _ => flag.to_string(),
    };
    let slowdown_by_flag = args.max_slowdown.is_some();
    let max_slowdown = match args.max_slowdown.or(file.max_slowdown.map(NumberOrText::into_text)) {
        Some(s) => super::parse_max_slowdown(&s).map_err(|e| {
            let why = e.to_string();
            let why = why.trim_start_matches("--max-slowdown: ").to_string();
            anyhow::anyhow!("{}: {why}", origin("--max-slowdown", "max_slowdown", slowdown_by_flag))
        })?,
        None => None,
    };
    let interference_by_flag = args.interference.is_some();
    let name = args.interference.or(file.interference).unwrap_or_else(|| dqngpu_interference::DEFAULT_MODEL.into());
    let budget_model: Arc<dyn dqngpu_interference::Interference> = Arc::from(
        dqngpu_interference::by_name(&name)
            .with_context(|| origin("--interference", "interference", interference_by_flag))?,
    );
    let caller = dqngpu_rl::scorer::Caller {
        max_slowdown,
        ..dqngpu_rl::scorer::Caller::for_config(&Default::default(), budget_model.clone())
    };
    let plan = super::PlanArgs {
        plan_rows: args.plan.plan_rows.or(file.plan_rows),
        plan_guard: args.plan.plan_guard.or(file.plan_guard),
    }
    .config()?;
    let policy = resolve_policy(&scheduler, model.as_deref(), seed, &caller, plan)?;
    let gpus_by_flag = args.gpus.is_some();
    let (gpus, monitor) =
        discover_gpus(args.gpus.or(file.gpus).as_deref()).with_context(|| origin("--gpus", "gpus", gpus_by_flag))?;
    // The supervisor is this very build, by `/proc/self/exe` (which names the running
    // binary even once its file is gone): the path it was started by may since hold another
    // version (an upgrade) or nothing, and every job then failed to start.
    let exe = PathBuf::from("/proc/self/exe");
    anyhow::ensure!(exe.exists(), "the job supervisor is this binary, found by {}: it is missing", exe.display());
    let mut cfg = ServiceConfig::new(
        data_dir,
        gpus,
        Supervisor::Shim { program: exe, args: vec!["serve".into(), "job-shim".into()] },
    );
    // Unset settings keep the defaults `ServiceConfig::new` and `HttpConfig::default` own.
    cfg.libraries = libraries;
    if let Some(ms) = args.tick_ms.or(file.tick_ms) {
        cfg.tick = Duration::from_millis(ms.max(10));
    }
    if let Some(n) = args.max_retries.or(file.max_retries) {
        cfg.max_retries = n;
    }
    cfg.max_slowdown = max_slowdown;
    cfg.budget_model = budget_model;
    cfg.mps_thread_pct = args.mps_thread_pct.or(file.mps_thread_pct);
    if cfg.mps_thread_pct.is_some_and(|p| p == 0 || p > 100) {
        anyhow::bail!("--mps-thread-pct must be 1..=100");
    }
    let mut http = HttpConfig { token, ..HttpConfig::default() };
    if let Some(listen) = args.listen.or(file.listen) {
        http.listen = listen;
    }
    let timeout_by_flag = args.request_timeout_s.is_some();
    if let Some(s) = args.request_timeout_s.or(file.request_timeout_s) {
        if s > MAX_REQUEST_TIMEOUT_S {
            anyhow::bail!(
                "{}: {s} s is more than {MAX_REQUEST_TIMEOUT_S} (a day)",
                origin("--request-timeout-s", "request_timeout_s", timeout_by_flag)
            );
        }
        http.request_timeout = Duration::from_secs(s.max(1));
    }
    dqngpu_service::check_listen(&http)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(dqngpu_service::serve(cfg, http, policy, monitor))?;
    Ok(())
}

fn read_token(p: &Path) -> anyhow::Result<String> {
    let t = std::fs::read_to_string(p).with_context(|| format!("reading the token file {}", p.display()))?;
    let t = t.trim().to_string();
    if t.len() < 16 {
        anyhow::bail!("{}: the token must be at least 16 characters", p.display());
    }
    Ok(t)
}

/// The policy by name (any case): the same resolver as `simulate`, so a trained agent runs
/// here unchanged.
fn resolve_policy(
    name: &str,
    model: Option<&Path>,
    seed: u64,
    caller: &dqngpu_rl::scorer::Caller,
    plan: Option<dqngpu_rl::scorer::plan::PlanConfig>,
) -> anyhow::Result<Arc<dyn Policy>> {
    Ok(Arc::from(super::simulate::resolve_scheduler(name.parse()?, model, seed, caller, plan)?))
}

/// NVML's GPUs when a driver is present, else the declared virtual GPUs.
fn discover_gpus(spec: Option<&str>) -> anyhow::Result<(Vec<GpuSlot>, Option<dqngpu_service::NvmlMonitor>)> {
    if let Some((slots, mon)) = dqngpu_service::discover_nvml() {
        if slots.is_empty() {
            let list = std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default();
            anyhow::bail!(
                "CUDA_VISIBLE_DEVICES={list:?} names none of this machine's GPUs (give NVML indices in PCI bus order or GPU- UUIDs; MIG devices are not placed on), so nothing could be placed"
            );
        }
        if spec.is_some() {
            tracing::warn!("an NVIDIA driver is present: using its GPUs and ignoring --gpus");
        }
        return Ok((slots, Some(mon)));
    }
    let Some(spec) = spec else {
        anyhow::bail!("no NVIDIA driver found; declare virtual GPUs with --gpus, e.g. --gpus titanxp:2");
    };
    let cluster = ClusterSpec::parse_gpus(spec)?;
    if cluster.nodes.len() != 1 {
        anyhow::bail!("--gpus {spec}: the service runs on one machine; give one node, e.g. titanxp:2");
    }
    Ok((cluster.gpus(), None))
}
