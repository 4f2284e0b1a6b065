//! The heuristics' mean JCT and makespan per workload class (issue 10's "baselines are not
//! strawmen" lines): thesis library, one Titan Xp, 30 jobs at t = 0, seeds 1000..1009, the
//! contention model.
//!
//! `cargo run -p dqngpu-sim --example baselines [--release] -- [SEEDS] [GPUS]`

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{ClusterSpec, WorkloadClass};
use dqngpu_sim::{draw, run, Arrivals, SimConfig, DEFAULT_JOBS};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seeds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10);
    let gpus = args.next().unwrap_or_else(|| "titanxp:1".into());
    let lib = dqngpu_model::library::resolve("thesis")?;
    let cluster = ClusterSpec::parse_gpus(&gpus)?;
    let interference: Arc<dyn Interference> = Arc::from(dqngpu_interference::by_name("contention")?);
    println!("class,scheduler,mean_jct_s,makespan_s,p95_exec_slowdown,liveness_starts,oom_kills");
    for class in WorkloadClass::ALL {
        for name in dqngpu_policy::NAMES {
            let (mut jct, mut mk, mut p95, mut live, mut oom) = (0.0, 0.0, 0.0, 0, 0);
            for seed in 1000..1000 + seeds {
                let set = draw(&lib, class, DEFAULT_JOBS, seed, Arrivals::AllAtZero)?;
                let p = dqngpu_policy::by_name(name, seed)?;
                let r = run(p.as_ref(), &cluster, &lib, &set, interference.clone(), SimConfig::default())?;
                let mut s: Vec<f64> = r.jobs.iter().filter_map(|j| j.exec_slowdown).collect();
                s.sort_by(f64::total_cmp);
                p95 += s.get(((s.len() as f64 * 0.95).ceil() as usize).saturating_sub(1)).copied().unwrap_or(1.0);
                jct += r.mean_jct_s;
                mk += r.makespan_s;
                live += r.liveness_starts;
                oom += r.oom_kills;
            }
            let n = seeds as f64;
            println!("{},{name},{:.1},{:.1},{:.3},{live},{oom}", class.name(), jct / n, mk / n, p95 / n);
        }
    }
    Ok(())
}
