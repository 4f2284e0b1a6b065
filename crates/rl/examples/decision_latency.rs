//! Times every decision of a DqnGPU model in the simulator, by how many jobs wait
//! (docs/BENCHMARKS.md, issue 10's decision-latency line).
//!
//! ```text
//! cargo run --release -p dqngpu-rl --example decision_latency -- MODEL [GPUS] [JOBS] [RATE] [SETS]
//! ```
//! `SCHEDULER=dqngpu-plan` times the plan (`PLAN_ROWS=N`: its rows per choice). `TOP=N` also
//! lists the N slowest decisions at 0-5 waiting.
//! Defaults: `4xtitanxp:2`, 30 thesis jobs, all at t = 0 (RATE `0`; else Poisson jobs per s),
//! 10 job sets per class, seeds 900000 + 100 x class + i (never training seeds).

use std::path::Path;
use std::sync::Arc;

use dqngpu_model::{ClusterSpec, WorkloadClass};
use dqngpu_rl::gpu::EVAL_SEED_BASE;

#[path = "common/timed.rs"]
mod timed;
use timed::Timed;

/// The allocator the `dqngpu` binary ships, so that these times are the service's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn quantiles(mut xs: Vec<f64>) -> String {
    if xs.is_empty() {
        return "no decisions".into();
    }
    xs.sort_by(f64::total_cmp);
    let q = |p: f64| xs[((xs.len() as f64 - 1.0) * p).round() as usize] * 1e3;
    format!("{:>6} decisions  p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms", xs.len(), q(0.5), q(0.99), q(1.0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(model) = args.first() else {
        return Err("usage: decision_latency MODEL [GPUS] [JOBS] [RATE] [SETS]".into());
    };
    let gpus = args.get(1).cloned().unwrap_or_else(|| "4xtitanxp:2".into());
    let jobs: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(30);
    let rate: f64 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(0.0);
    let sets: usize = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(10);
    let arrivals =
        if rate > 0.0 { dqngpu_sim::Arrivals::Poisson { rate_per_s: rate } } else { dqngpu_sim::Arrivals::AllAtZero };
    let library = dqngpu_model::library::resolve("thesis")?;
    let cluster = ClusterSpec::parse_gpus(&gpus)?;
    let interference: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name("contention")?);
    // SCHEDULER=dqngpu-plan times the scorer with search at decision time; PLAN_ROWS=N sets
    // its rows per choice (as `--plan-rows`).
    let scheduler = std::env::var("SCHEDULER").unwrap_or_else(|_| "dqngpu".into());
    let plan = match std::env::var("PLAN_ROWS") {
        Ok(rows) => Some(dqngpu_rl::scorer::plan::PlanConfig::new(
            rows.parse()?,
            dqngpu_rl::scorer::plan::PlanConfig::default().makespan_guard,
        )?),
        Err(_) => None,
    };
    let name: dqngpu_rl::SchedulerName = scheduler.parse()?;
    let policy = name.resolve_planned(Some(Path::new(model)), 0, &Default::default(), plan)?;
    let timed = Timed::new(policy.as_ref());
    for (c, class) in WorkloadClass::ALL.into_iter().enumerate() {
        for i in 0..sets {
            let set = dqngpu_sim::draw(&library, class, jobs, EVAL_SEED_BASE + 100 * c as u64 + i as u64, arrivals)?;
            dqngpu_sim::run(&timed, &cluster, &library, &set, interference.clone(), Default::default())?;
        }
    }
    let times = timed.times.lock().map(|v| v.clone()).unwrap_or_default();
    println!("{scheduler}: {gpus}, {jobs} thesis jobs per set ({arrivals:?}), {sets} sets per class, contention");
    println!("all:           {}", quantiles(timed.seconds()));
    for (lo, hi) in [(0, 5), (6, 15), (16, usize::MAX)] {
        let label = if hi == usize::MAX { format!("{lo}+ waiting:") } else { format!("{lo}-{hi} waiting:") };
        println!("{label:<14} {}", quantiles(times.iter().filter(|t| t.0 >= lo && t.0 <= hi).map(|t| t.1).collect()));
    }
    // TOP=N: the N slowest decisions at 0-5 waiting (to see what the tail is made of).
    if let Some(n) = std::env::var("TOP").ok().and_then(|v| v.parse::<usize>().ok()) {
        let mut few: Vec<(usize, f64)> = times.iter().filter(|t| t.0 <= 5).copied().collect();
        few.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (w, s) in few.into_iter().take(n) {
            println!("  {w} waiting  {:.3} ms", s * 1e3);
        }
    }
    Ok(())
}
