//! `dqngpu k8s extender`: the kube-scheduler extender. Flags become typed configs here; the
//! extender lives in the dqngpu-k8s crate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use dqngpu_k8s::api::HttpConfig;
use dqngpu_k8s::apiserver::{ApiClient, ApiConfig};
use dqngpu_k8s::devices::{hami_lock_expire_s, HamiDefaults, HAMI_LOCK_EXPIRE_ENV};
use dqngpu_k8s::state::{Profiles, StateConfig};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Run the scheduler extender (filter, prioritize, bind) for gpushare and HAMi pods.
    Extender(ExtenderArgs),
}

/// GPU memory unit of gpushare's `aliyun.com/gpu-mem`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum MemoryUnit {
    /// GiB (gpushare's default).
    #[value(name = "GiB")]
    Gib,
    /// MiB (device plugin run with `--memory-unit=MiB`).
    #[value(name = "MiB")]
    Mib,
}

#[derive(clap::Args, Debug)]
struct ExtenderArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:39999")]
    listen: SocketAddr,
    /// kubeconfig file (token, client certificate, or plain http); without it the in-cluster
    /// service account, else $KUBECONFIG.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Route prefix, e.g. `/gpushare-scheduler` (routes are PREFIX/filter, /prioritize, /bind).
    #[arg(long, default_value = "")]
    url_prefix: String,
    /// Placement policy: any heuristic (`dqngpu simulate --help` lists them) or an RL agent
    /// with --model. Default `greedy`: it chooses by predicted interference where memory does
    /// not decide, and keeps filter+prioritize within 10 ms at 1,000 nodes (docs/BENCHMARKS.md).
    #[arg(long, default_value = "greedy")]
    scheduler: String,
    /// Checkpoint of a trained RL agent.
    #[arg(long)]
    model: Option<PathBuf>,
    /// dqngpu-plan's search settings.
    #[command(flatten)]
    plan: super::PlanArgs,
    /// Seed for policies that draw random numbers.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Profile libraries by app name: `thesis`, `lucid` or a directory; repeatable [default: thesis].
    #[arg(long)]
    library: Vec<String>,
    /// Unit of gpushare's aliyun.com/gpu-mem.
    #[arg(long, value_enum, default_value = "GiB")]
    memory_unit: MemoryUnit,
    /// Largest request body, MiB (full Nodes lists of big clusters are large), 1 to 4096.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=4096))]
    max_body_mib: u16,
    /// Per-request time limit, seconds.
    #[arg(long, default_value_t = 30)]
    request_timeout_s: u64,
    /// Seconds a bound pod is held as assumed if the watch never shows it.
    #[arg(long, allow_negative_numbers = true, default_value_t = 300.0)]
    assume_ttl_s: f64,
    /// HAMi's `defaultMemory`: MiB per vGPU for a pod that sets neither nvidia.com/gpumem nor
    /// nvidia.com/gpumem-percentage (0, HAMi's default: the whole card). Set it to what
    /// HAMi's scheduler is configured with.
    #[arg(long, default_value_t = 0)]
    hami_default_memory_mib: u32,
    /// HAMi's `defaultCores`: compute percent per vGPU for a pod that does not set
    /// nvidia.com/gpucores (0, HAMi's default), 0 to 100.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    hami_default_cores: u8,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Extender(a) => extender(a),
    }
}

fn api_config(kubeconfig: Option<PathBuf>) -> anyhow::Result<ApiConfig> {
    if let Some(p) = kubeconfig {
        return Ok(ApiConfig::from_kubeconfig(&p)?);
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return Ok(ApiConfig::in_cluster()?);
    }
    match std::env::var_os("KUBECONFIG") {
        Some(p) if !p.is_empty() => Ok(ApiConfig::from_kubeconfig(&PathBuf::from(p))?),
        _ => anyhow::bail!("no apiserver: give --kubeconfig FILE, set KUBECONFIG, or run in a pod"),
    }
}

fn extender(a: ExtenderArgs) -> anyhow::Result<()> {
    let libraries = if a.library.is_empty() { vec!["thesis".to_string()] } else { a.library.clone() };
    let libraries = libraries
        .iter()
        .map(|l| dqngpu_model::library::resolve(l).with_context(|| format!("--library {l}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let policy: Arc<dyn dqngpu_model::Policy> = Arc::from(super::simulate::resolve_scheduler(
        a.scheduler.parse()?,
        a.model.as_deref(),
        a.seed,
        &Default::default(),
        a.plan.config()?,
    )?);
    if a.assume_ttl_s.is_nan() || a.assume_ttl_s <= 0.0 {
        anyhow::bail!("--assume-ttl-s must be > 0");
    }
    let cfg = StateConfig {
        unit_mib: if a.memory_unit == MemoryUnit::Gib { 1024.0 } else { 1.0 },
        assume_ttl_s: a.assume_ttl_s,
        hami_defaults: HamiDefaults {
            memory_mib: f64::from(a.hami_default_memory_mib),
            cores: f64::from(a.hami_default_cores),
        },
        // HAMi reads its node lock's expiry from this variable; so does the extender.
        hami_lock_expire_s: hami_lock_expire_s(std::env::var(HAMI_LOCK_EXPIRE_ENV).ok().as_deref())
            .map_err(anyhow::Error::msg)?,
        ..Default::default()
    };
    let client = ApiClient::new(api_config(a.kubeconfig)?);
    let http = HttpConfig {
        prefix: a.url_prefix,
        max_body_bytes: usize::from(a.max_body_mib) * 1024 * 1024,
        request_timeout: Duration::from_secs(a.request_timeout_s.max(1)),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(async move {
        let state = dqngpu_k8s::start(client, cfg, Profiles::new(&libraries), policy);
        dqngpu_k8s::serve(state, &http, a.listen, dqngpu_service::shutdown_signal()).await
    })
    .with_context(|| format!("serving on {}", a.listen))?;
    Ok(())
}
