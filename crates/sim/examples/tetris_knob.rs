//! Tetris's remaining-work weight `m` (Grandl et al., SIGCOMM'14, §3.3: `ε = m ā / p̄`),
//! swept on training seeds (0..SEEDS, never the experiment's evaluation seeds 1000..), so the
//! shipped `tetris::KNOB` is the rule's best setting, chosen as a tuned knob of our own would be.
//!
//! `cargo run --release -p dqngpu-sim --example tetris_knob -- [SEEDS] [KNOBS]`
//! (KNOBS comma-separated; default 0,0.25,0.5,1,2,4,8). Settings: the experiment's cells'
//! clusters and libraries (thesis on one Titan Xp, 30 jobs at t = 0; thesis on 4 x 2 Titan Xp,
//! 120 jobs Poisson at 0.1/s; `lucid` on one RTX 3090; `generated:1` on one Titan Xp), every
//! class, the contention model. Prints each (setting, class, m) and, per m, the geometric mean
//! over (setting, class) of mean JCT and makespan relative to the first m listed.

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{ClusterSpec, WorkloadClass};
use dqngpu_policy::Tetris;
use dqngpu_sim::{draw, run, Arrivals, SimConfig, DEFAULT_JOBS};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seeds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10);
    let knobs: Vec<f64> = match args.next() {
        Some(s) => s.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => vec![0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
    };
    let settings = [
        ("thesis", "titanxp:1", DEFAULT_JOBS, Arrivals::AllAtZero),
        ("thesis", "4xtitanxp:2", 120, Arrivals::Poisson { rate_per_s: 0.1 }),
        ("lucid", "rtx3090:1", DEFAULT_JOBS, Arrivals::AllAtZero),
        ("generated:1", "titanxp:1", DEFAULT_JOBS, Arrivals::AllAtZero),
    ];
    let interference: Arc<dyn Interference> = Arc::from(dqngpu_interference::by_name("contention")?);
    println!("library,gpus,class,knob,mean_jct_s,makespan_s");
    // Per knob, the sums of log(JCT / first knob's) and log(makespan / first knob's).
    let mut logs = vec![(0.0f64, 0.0f64); knobs.len()];
    let mut cells = 0usize;
    for (library, gpus, n_jobs, arrivals) in settings {
        let lib = dqngpu_model::library::resolve(library)?;
        let cluster = ClusterSpec::parse_gpus(gpus)?;
        for class in WorkloadClass::ALL {
            let sets: Vec<_> = (0..seeds).map(|s| draw(&lib, class, n_jobs, s, arrivals)).collect::<Result<_, _>>()?;
            let mut first = None;
            for (k, &knob) in knobs.iter().enumerate() {
                let tetris = Tetris::with_knob(knob);
                let (mut jct, mut mk) = (0.0, 0.0);
                for set in &sets {
                    let r = run(&tetris, &cluster, &lib, set, interference.clone(), SimConfig::default())?;
                    jct += r.mean_jct_s / seeds as f64;
                    mk += r.makespan_s / seeds as f64;
                }
                println!("{library},{gpus},{},{knob},{jct:.1},{mk:.1}", class.name());
                let (j0, m0) = *first.get_or_insert((jct, mk));
                logs[k].0 += (jct / j0).ln();
                logs[k].1 += (mk / m0).ln();
            }
            cells += 1;
        }
    }
    println!("\nknob,jct_vs_first,makespan_vs_first (geometric means over {cells} (setting, class) pairs)");
    for (knob, (j, m)) in knobs.iter().zip(&logs) {
        println!("{knob},{:.4},{:.4}", (j / cells as f64).exp(), (m / cells as f64).exp());
    }
    Ok(())
}
