//! Times one 30-job random-workload simulation (thesis library, one Titan Xp, contention
//! interference) under SJF and Tetris: median wall time per simulation on this thread and
//! job-steps per second. Run: `cargo bench -p dqngpu-sim` (args: `[runs] [interference] [decision tick s]`).

use std::sync::Arc;
use std::time::Instant;

use dqngpu_model::{library, ClusterSpec, WorkloadClass};
use dqngpu_sim::{draw, run, Arrivals, SimConfig};

fn main() {
    // `cargo bench` passes `--bench`; take the first numeric argument as the run count.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let runs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(101);
    let model = args.get(1).cloned().unwrap_or_else(|| "contention".into());
    let tick: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(SimConfig::default().decision_tick_s);
    let config = SimConfig { decision_tick_s: tick, ..SimConfig::default() };
    let lib = library::resolve("thesis").expect("thesis library");
    let cluster = ClusterSpec::parse_gpus("titanxp:1").expect("cluster");
    let set = draw(&lib, WorkloadClass::Random, 30, 0, Arrivals::AllAtZero).expect("workload");
    let interference: Arc<dyn dqngpu_interference::Interference> =
        Arc::from(dqngpu_interference::by_name(&model).expect("interference"));
    println!(
        "30-job random workload (seed 0), thesis library, titanxp:1, {model}, tick {tick} s; median of {runs} runs"
    );
    for name in ["sjf", "tetris"] {
        let policy = dqngpu_policy::by_name(name, 0).expect("policy");
        let once = || run(policy.as_ref(), &cluster, &lib, &set, interference.clone(), config.clone()).expect("sim");
        let first = once();
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let r = once();
                let dt = t.elapsed().as_secs_f64();
                assert_eq!(r.job_steps, first.job_steps);
                dt
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "{name:<7} median {:>9.1} us  (min {:>9.1}, max {:>9.1})  steps {:>6}  job-steps {:>6}  decisions {:>4}  \
             {:>7.2} M job-steps/s  makespan {:.1} s",
            median * 1e6,
            times[0] * 1e6,
            times[times.len() - 1] * 1e6,
            first.steps,
            first.job_steps,
            first.decisions,
            first.job_steps as f64 / median / 1e6,
            first.makespan_s
        );
    }
}
