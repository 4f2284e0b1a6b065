//! Measures the trained agents against the heuristics on unseen job sets of every workload
//! class (issue 3's acceptance), with 95% confidence intervals, and DqnGPU's decision latency.
//!
//! ```text
//! cargo run --release -p dqngpu-rl --example acceptance -- DQNGPU MAX MEAN [SETS] [GPUS] [TICK]
//! ```
//! TICK is the simulator's decision tick trigger, `peak-drop` (default) or `always`.
//! Job set `i` of class `c` (index in the thesis's order) is drawn with seed
//! 900000 + 100 c + i: never a training seed (training uses SEED * 1000 + i, SEED < 900).

use std::path::Path;
use std::sync::Arc;

use dqngpu_model::{ClusterSpec, Policy, WorkloadClass};
use dqngpu_rl::gpu::EVAL_SEED_BASE;

#[path = "common/timed.rs"]
mod timed;
use timed::Timed;

/// Mean and half-width of the 95% confidence interval (Student t).
fn ci(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    // t(0.975, df) for df = 1..30; beyond, 1.96.
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    let t = T.get(xs.len() - 2).copied().unwrap_or(1.96);
    (mean, t * (var / n).sqrt())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        return Err("usage: acceptance DQNGPU_MODEL MAX_MODEL MEAN_MODEL [SETS_PER_CLASS] [GPUS] [TICK]".into());
    }
    let sets: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(10);
    let gpus = args.get(4).cloned().unwrap_or_else(|| "titanxp:1".into());
    let tick_trigger = match args.get(5).map(String::as_str) {
        None | Some("peak-drop") => dqngpu_sim::TickTrigger::PeakDrop,
        Some("always") => dqngpu_sim::TickTrigger::Always,
        Some(other) => return Err(format!("TICK: expected peak-drop or always, got `{other}`").into()),
    };
    let sim_config = dqngpu_sim::SimConfig { tick_trigger, ..Default::default() };
    let library = dqngpu_model::library::resolve("thesis")?;
    let cluster = ClusterSpec::parse_gpus(&gpus)?;
    let interference: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name("contention")?);
    let mut policies: Vec<Box<dyn Policy>> =
        vec![dqngpu_rl::policy_by_name("sjf", None, 0)?, dqngpu_rl::policy_by_name("tetris", None, 0)?];
    for (name, path) in [("deeprm-max", &args[1]), ("deeprm-mean", &args[2]), ("dqngpu", &args[0])] {
        policies.push(dqngpu_rl::policy_by_name(name, Some(Path::new(path)), 0)?);
    }
    println!("cluster {gpus}, interference contention, tick {tick_trigger:?} (dqngpu asks for every tick), {sets} unseen job sets of 30 jobs per class (seeds {EVAL_SEED_BASE} + 100 x class + i)");
    println!(
        "{:<10} {:<12} {:>20} {:>14} {:>18} {:>14}",
        "class", "scheduler", "makespan_s (95% CI)", "oom_kills", "no_slowdown_jobs", "gpu_util_pct"
    );
    let mut latencies = Vec::new();
    for (c, class) in WorkloadClass::ALL.into_iter().enumerate() {
        let jobsets: Vec<_> = (0..sets)
            .map(|i| {
                dqngpu_sim::draw(
                    &library,
                    class,
                    30,
                    EVAL_SEED_BASE + 100 * c as u64 + i as u64,
                    dqngpu_sim::Arrivals::AllAtZero,
                )
            })
            .collect::<Result<_, _>>()?;
        for p in &policies {
            let timed = Timed::new(p.as_ref());
            let (mut mk, mut oom, mut none, mut util) = (vec![], vec![], vec![], vec![]);
            for set in &jobsets {
                let r = dqngpu_sim::run(&timed, &cluster, &library, set, interference.clone(), sim_config.clone())?;
                mk.push(r.makespan_s);
                oom.push(r.oom_kills as f64);
                none.push(r.slowdown_buckets.none as f64);
                util.push(r.avg_gpu_util_pct);
            }
            if p.name() == "dqngpu" {
                latencies.extend(timed.seconds());
            }
            let (m, h) = ci(&mk);
            let f = |xs: &[f64]| {
                let (m, h) = ci(xs);
                format!("{m:.1} ± {h:.1}")
            };
            println!(
                "{:<10} {:<12} {:>20} {:>14} {:>18} {:>14}",
                class.name(),
                p.name(),
                format!("{m:.0} ± {h:.0}"),
                f(&oom),
                f(&none),
                f(&util)
            );
        }
    }
    latencies.sort_by(f64::total_cmp);
    let q = |p: f64| {
        latencies.get(((latencies.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN) * 1e3
    };
    println!(
        "dqngpu decision latency over {} decisions: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        latencies.len(),
        q(0.5),
        q(0.99),
        q(1.0)
    );
    Ok(())
}
